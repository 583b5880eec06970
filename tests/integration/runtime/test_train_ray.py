"""`runtime: ray` end to end on one machine: the quickstart preset with two fleet
workers (one local desktop each) as Ray actors, the scheduler and gate services,
model replicas as Ray actors, and both learners as two ZeRO-3 DeepSpeed ranks each,
Ray actors in one placement group per learner (docs/learner-ranks.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cua_rl.config import RunConfig, load_config
from cua_rl.learner.service import latest_checkpoint
from cua_rl.runtime.ray.train import run_training_ray
from cua_rl.store.run_store import RunStore

pytestmark = [pytest.mark.desktop, pytest.mark.model]


@pytest.fixture
def ray_config(tmp_path: Path, primed_tiny_model_dir: Path, local_desktops: None
               ) -> RunConfig:
    """The primed model: its samples parse, so both learners get updates to split.
    Its policy updates come early, so the update budget is as large as the group
    budget: the run still ends after `fleet.max_groups` groups."""
    pytest.importorskip("ray")
    pytest.importorskip("deepspeed")
    ranks = [f"train.{role}.{key}" for role in ("policy", "prm") for key in (
        "ranks=2", "rank_cpus=0.5", "engine.type=deepspeed", "engine.zero_stage=3")]
    return load_config(RunConfig, preset="quickstart", overrides=[
        "runtime=ray", "ray.fleet_workers=2", "ray.init_num_cpus=6", "ray.inference=ray",
        f"desktops.provider.state_dir={tmp_path / 'state'}",
        f"tiny_model_dir={primed_tiny_model_dir}",
        "episode.max_steps=2", "fleet.max_groups=4", "train.max_policy_updates=4",
        "metrics.live=false", "metrics.tensorboard=false", *ranks,
    ])


async def test_ray_run_spreads_episodes_over_workers_and_stops_everything(
        ray_config: RunConfig, tmp_path: Path) -> None:
    import ray

    run_dir = tmp_path / "run"
    summary = await run_training_ray(ray_config, run_dir)

    groups = ray_config.fleet.max_groups * ray_config.fleet.group_size
    assert summary["trajectories"] + summary["aborted"] >= groups
    assert summary["trajectories"] > 0 and summary["verdicts"] > 0
    workers = summary["episodes_per_worker"]
    assert set(workers) == {"w0", "w1"} and all(n > 0 for n in workers.values()), workers
    store = RunStore(run_dir)
    counters = store.counters()
    assert counters["episodes/w0"] > 0 and counters["episodes/w1"] > 0
    for tid in store.finished_trajectory_ids():
        traj = store.load_trajectory(tid)
        assert [v.step_index for v in store.load_verdicts(tid)] == [s.index for s in traj.steps]
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    rollouts = [m for m in metrics if m["scope"] == "rollout"]
    assert len(rollouts) == ray_config.fleet.max_groups  # one record per finished group
    assert rollouts[-1]["steps_per_s"] > 0 and rollouts[-1]["desktop_utilization"] > 0
    learners = [m for m in metrics if m["scope"] in ("policy", "prm")]
    assert {m["scope"] for m in learners} == {"policy", "prm"}, summary
    assert all(m["ranks"] == 2 and "rank1_tokens" in m for m in learners), learners
    ckpt, _ = latest_checkpoint(run_dir / "checkpoints", "policy")
    assert json.loads((ckpt / "ranks.json").read_text())["ranks"] == 2
    # everything stopped: Ray (started by the run), its rank actors, desktops, replicas
    assert not ray.is_initialized()
    left = [p.name for p in (tmp_path / "state").iterdir()
            if p.is_dir() and p.name not in ("home-template", "locks")]
    assert left == []
