"""`config show --plan`: processes and GPUs per role from the resolved config, and
each learner rank's memory from DeepSpeed's own estimators (no model, no hub)."""

from __future__ import annotations

import json

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
    assert [
        (r, by_role[r].units, by_role[r].units * by_role[r].gpus_each)
        for r in (
            "policy replicas",
            "prm replicas",
            "rewriter replicas",
            "policy learner",
            "prm learner",
        )
    ] == [
        ("policy replicas", 4, 4),
        ("prm replicas", 2, 2),
        ("rewriter replicas", 1, 1),
        ("policy learner", 1, 1),
        ("prm learner", 1, 1),
    ]
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
        shape.params,
        shape.largest_param,
        num_gpus_per_node=8,
        cpu_offload=False,
        cpu_offload_params=False,
    )
    assert memory.model_states == gpu
    assert memory.reference == shape.params * 4  # kl_beta 0.01: a float32 reference


def test_ray_replicas_and_gpu_learners_are_bundles_even_of_one_rank() -> None:
    plan = build_plan(paper("runtime=ray", "ray.inference=ray", "ray.fleet_workers=4"))
    by_role = {p.role: p for p in plan.placements}
    assert "bundle {CPU: 1, GPU: 1}" in by_role["policy replicas"].what
    assert by_role["fleet workers"].units == 4
    assert "24 episode actors and 24 docker desktops each" in by_role["fleet workers"].what
    # a GPU learner is Ray's to place, never the driver's (whose GPUs Ray does not count)
    learner = by_role["policy learner"]
    assert "a Ray actor in a bundle" in learner.what and learner.units == 1
    assert "set train.policy.rank_gpus=1" in learner.what
    assert not any("driver" in note for note in plan.notes)


def test_servers_given_by_url_start_nothing() -> None:
    plan = build_plan(paper("policy.urls=[http://127.0.0.1:9]"))
    policy = next(p for p in plan.placements if p.role == "policy replicas")
    assert (policy.units, policy.gpus_each) == (0, 0)


def test_an_unknown_hub_model_is_named_not_guessed() -> None:
    plan = build_plan(paper("policy.model=someone/unknown-model"))
    assert plan.learners[0].memory is None
    assert "unknown model" in plan.learners[0].advice


def test_config_show_plan_prints_the_plan() -> None:
    result = CliRunner().invoke(
        cli, ["config", "show", "--preset", "rlanything-osworld", "--plan", "--gpu-gib", "80"]
    )
    assert result.exit_code == 0, result.output
    assert "GPUs in total: 9" in result.output
    assert "estimate_zero3_model_states_mem_needs(ranks=1, no offload)" in result.output
    assert "over 80 GiB: set train.policy.ranks=" in result.output


@pytest.mark.parametrize(
    ("switch", "prm_replicas"), [("train.prm.enabled=false", True), ("judge.enabled=false", False)]
)
def test_a_frozen_or_absent_reward_model_has_no_learner_in_the_plan(
    switch: str, prm_replicas: bool
) -> None:
    """`run_roles` decides for the launchers and the plan alike: a frozen reward model
    still has its replicas (it judges) and no learner; with the judge off, neither."""
    done = CliRunner().invoke(
        cli, ["config", "show", "--preset", "rlanything-osworld", "--plan", switch]
    )
    assert done.exit_code == 0, done.output
    assert "prm learner" not in done.output and "policy learner" in done.output
    assert ("prm replicas" in done.output) is prm_replicas
    plan = build_plan(paper(switch))
    assert [lm.role for lm in plan.learners] == ["policy"]
    assert plan.gpus == (8 if prm_replicas else 6)  # 9 less one learner (and 2 replicas)


def test_plan_json_covers_desktops_and_the_weight_sync_of_each_trained_role() -> None:
    done = CliRunner().invoke(
        cli, ["config", "show", "--preset", "rlanything-osworld", "--plan", "--json"]
    )
    assert done.exit_code == 0, done.output
    plan = json.loads(done.stdout)
    assert plan["gpus"] == 9 and {p["role"] for p in plan["placements"]} >= {
        "policy replicas",
        "prm replicas",
        "rewriter replicas",
        "policy learner",
        "prm learner",
    }
    # 96 docker desktops of OSWorld's VM: 4 vCPUs and 4 GiB each, a reset is a new container
    desktops = plan["desktops"]
    assert (desktops["provider"], desktops["count"]) == ("docker", 96)
    assert (desktops["total_vcpus"], desktops["total_memory_gib"]) == (384, 384)
    assert "new container" in desktops["reset"]
    # the sync path per role: 8.77 B bf16 parameters = 17.5 GB to each replica in turn
    sync = {s["role"]: s for s in plan["sync"]}
    assert set(sync) == {"policy", "prm"}
    assert sync["policy"]["mode"] == "collective" and "gloo" in sync["policy"]["transport"]
    assert sync["policy"]["dtype"] == "bf16" and sync["policy"]["gigabytes"] == 17.53
    assert sync["policy"]["replicas"] == 4 and sync["prm"]["replicas"] == 2
    assert sync["policy"]["seconds_per_sync"] == pytest.approx(
        4 * sync["policy"]["seconds_per_replica"], rel=0.01
    )
    frozen = json.loads(
        CliRunner()
        .invoke(
            cli,
            [
                "config",
                "show",
                "--preset",
                "rlanything-osworld",
                "--plan",
                "--json",
                "train.prm.enabled=false",
            ],
        )
        .stdout
    )
    assert [s["role"] for s in frozen["sync"]] == ["policy"]
