"""`runtime: ray` end to end on one machine, with every training switch on at once: two
fleet workers (one local desktop each) as Ray actors, the scheduler and gate services,
two policy replicas and the reward model as Ray actors, per-task budgets decided on
the driver and sent with each variant, success replay, high-entropy steps only,
staggered weight sync followed by the workers' pools, and spans from every process
(docs/algorithms.md; runtime/ray/)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from tests_support.coin_pair import write_coin_pair

from cua_rl.config import RunConfig, load_config
from cua_rl.runtime.ray.routing import ROUTING_WITHHELD
from cua_rl.runtime.ray.train import run_training_ray
from cua_rl.store.run_store import RunStore

pytestmark = [pytest.mark.desktop, pytest.mark.model]

GROUPS = 12
"""Groups of the coin task (a success with p = 0.293, so half the groups of two have
none): the chance that no all-failed group follows a group with a success, the
condition for success replay to act, is (GROUPS - 1) / 2^(GROUPS - 2) < 1 %."""


@pytest.fixture
def ray_config(tmp_path: Path, primed_tiny_model_dir: Path, local_desktops: None) -> RunConfig:
    pytest.importorskip("ray")
    pairs = tmp_path / "pairs"
    write_coin_pair(pairs)
    return load_config(
        RunConfig,
        preset="quickstart",
        overrides=[
            "runtime=ray",
            "ray.fleet_workers=2",
            "ray.init_num_cpus=6",
            "ray.inference=ray",
            f"tasks.source=pairs:{pairs}",
            "tasks.ids=[]",
            "tasks.split=null",
            f"desktops.provider.state_dir={tmp_path / 'state'}",
            f"tiny_model_dir={primed_tiny_model_dir}",
            "seed=3",
            "policy.replicas=2",
            "episode.max_steps=1",
            "adapt.enabled=false",
            "fleet.group_size=3",
            f"fleet.max_groups={GROUPS}",
            f"train.max_policy_updates={GROUPS}",
            # per-task budgets: past 3 scored rollouts the coin task counts as solved (its
            # accuracy is above 0.15) and its groups shrink from 3 rollouts to 2
            "train.budgets.enabled=true",
            "train.budgets.min_scored=3",
            "train.budgets.solved_above=0.15",
            "train.budgets.unsolved_below=0.0",
            "train.replay.enabled=true",
            "train.policy.entropy_top_fraction=0.5",
            "metrics.spans=true",
            "metrics.live=false",
            "metrics.tensorboard=false",
        ],
    )


async def test_every_switch_runs_under_ray_and_everything_stops(
    ray_config: RunConfig, tmp_path: Path
) -> None:
    import ray

    from cua_rl.report.loop_profile import load_spans, profile

    run_dir = tmp_path / "run"
    summary = await run_training_ray(ray_config, run_dir)

    assert summary["trajectories"] > 0 and summary["verdicts"] > 0
    workers = summary["episodes_per_worker"]
    assert set(workers) == {"w0", "w1"} and all(n > 0 for n in workers.values()), workers
    store = RunStore.read_only(run_dir)
    try:
        counters = store.counters()
        sizes = Counter(r["group_id"] for r in store.trajectory_records())
        replays = store.events("success_replay")
        withheld = store.events(ROUTING_WITHHELD)
    finally:
        store.close()
    assert counters["episodes/w0"] > 0 and counters["episodes/w1"] > 0
    # budgets: the first groups have the global 3 rollouts, later ones the budget's 2
    assert 3 in sizes.values() and 2 in sizes.values(), sizes
    # success replay: a stored success put into a group where nothing succeeded
    assert replays and counters.get("replay_groups", 0) == len(replays), counters
    # high-entropy steps only: half of each update's samples are left out
    assert counters.get("policy_unused_low_entropy", 0) > 0, counters
    # staggered sync: a worker routed around a replica the driver was updating
    assert withheld and {e["subject"] for e in withheld} == {"policy"}, withheld
    # spans from the driver and every worker: the episode breakdown sums to wall time
    loop = profile(load_spans(run_dir))
    assert loop["episodes"] > 0 and loop["breakdown"]["sum_error"] < 0.05, loop
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    rollouts = [m for m in metrics if m["scope"] == "rollout"]
    assert len(rollouts) == GROUPS and rollouts[-1]["steps_per_s"] > 0
    assert any(m.get("budget_next_rollouts") == 2 for m in rollouts)
    # everything stopped: Ray (started by the run), its actors, desktops, replicas
    assert not ray.is_initialized()
    left = [
        p.name
        for p in (tmp_path / "state").iterdir()
        if p.is_dir() and p.name not in ("home-template", "locks")
    ]
    assert left == []
