"""`config show --plan`: processes and GPUs per role from the resolved config, and
each learner rank's memory from DeepSpeed's own estimators (no model, no hub)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

pytest.importorskip("deepspeed")

from cua_rl.cli import cli  # noqa: E402
from cua_rl.config import RunConfig, load_config  # noqa: E402
from cua_rl.learner.memory_estimate import GIB, estimate_rank_memory  # noqa: E402
from cua_rl.learner.model_shapes import model_shape  # noqa: E402
from cua_rl.runtime.placement_plan import build_plan  # noqa: E402


def paper(*overrides: str) -> RunConfig:
    return load_config(RunConfig, preset="rlanything-osworld", overrides=overrides)


def test_paper_preset_places_every_role_and_counts_its_gpus() -> None:
    plan = build_plan(paper())
    by_role = {p.role: p for p in plan.placements}
    assert [(r, by_role[r].units, by_role[r].units * by_role[r].gpus_each) for r in (
        "policy replicas", "prm replicas", "rewriter replicas", "policy learner",
        "prm learner")] == [("policy replicas", 4, 4), ("prm replicas", 2, 2),
                            ("rewriter replicas", 1, 1), ("policy learner", 1, 1),
                            ("prm learner", 1, 1)]
    assert "96 episode actors" in by_role["fleet"].what
    assert "96 docker desktops" in by_role["fleet"].what
    assert plan.gpus == 9


def test_paper_preset_learner_on_one_rank_is_told_what_fits_80_gib() -> None:
    """ZeRO-3 on one rank shards nothing: 8.77 B parameters need ~150 GiB of model
    states alone, so the plan names ranks and micro-batch settings that fit."""
    policy = build_plan(paper()).learners[0]
    assert policy.shape is not None and policy.shape.params == 8_767_123_696
    assert policy.memory is not None and policy.memory.total > 80 * GIB
    assert "train.policy.ranks=8 train.policy.micro_batch_tokens=2048" in policy.advice
    # what the advice promises holds
    fitted = paper("train.policy.micro_batch_tokens=2048").train.policy
    assert estimate_rank_memory(policy.shape, fitted, 8).total <= 80 * GIB
    assert estimate_rank_memory(policy.shape, fitted, 4).total > 80 * GIB


def test_model_states_are_deepspeeds_zero3_estimate() -> None:
    from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs

    shape = model_shape("Qwen/Qwen3-VL-8B-Thinking")
    assert shape is not None
    memory = estimate_rank_memory(shape, paper().train.policy, 8)
    _, gpu, _ = estimate_zero3_model_states_mem_needs(
        shape.params, shape.largest_param, num_gpus_per_node=8, cpu_offload=False,
        cpu_offload_params=False)
    assert memory.model_states == gpu
    assert memory.reference == shape.params * 4  # kl_beta 0.01: a float32 reference


def test_ray_replicas_are_bundles_and_learners_stay_with_the_driver() -> None:
    plan = build_plan(paper("runtime=ray", "ray.inference=ray", "ray.fleet_workers=4"))
    by_role = {p.role: p for p in plan.placements}
    assert "bundle {CPU: 1, GPU: 1}" in by_role["policy replicas"].what
    assert by_role["fleet workers"].units == 4
    assert "24 episode actors and 24 docker desktops each" in by_role["fleet workers"].what
    assert any("driver" in note for note in plan.notes)


def test_servers_given_by_url_start_nothing() -> None:
    plan = build_plan(paper("policy.urls=[http://127.0.0.1:9]"))
    policy = next(p for p in plan.placements if p.role == "policy replicas")
    assert (policy.units, policy.gpus_each) == (0, 0)


def test_an_unknown_hub_model_is_named_not_guessed() -> None:
    plan = build_plan(paper("policy.model=someone/unknown-model"))
    assert plan.learners[0].memory is None
    assert "unknown model" in plan.learners[0].advice


def test_config_show_plan_prints_the_plan() -> None:
    result = CliRunner().invoke(cli, ["config", "show", "--preset", "rlanything-osworld",
                                      "--plan", "--gpu-gib", "80"])
    assert result.exit_code == 0, result.output
    assert "GPUs in total: 9" in result.output
    assert "estimate_zero3_model_states_mem_needs(ranks=1, no offload)" in result.output
    assert "over 80 GiB: set train.policy.ranks=" in result.output
