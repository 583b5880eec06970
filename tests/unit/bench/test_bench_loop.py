"""`cua-rl bench loop`'s arithmetic on a hand-made run: the measured window (first
rollout to the last update synced, from the store), policy requests answered during
weight syncs, and the simulator's latency file (it must validate and describe this
fleet's shape). The runs themselves are the benchmark's, not a test's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cua_rl.bench.loop import latency_file
from cua_rl.bench.loop_figures import during_syncs, measured_window
from cua_rl.config import RunConfig, load_config
from cua_rl.rollout.latency import LatencyModel
from cua_rl.store.run_store import RunStore
from cua_rl.store.schema import UPDATE
from cua_rl.types import Trajectory, TrajectoryStatus


def _span(kind: str, start: float, end: float, **attrs: Any) -> dict[str, Any]:
    return {"kind": kind, "start": start, "end": end, "pid": 1, **attrs}


def _run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    store = RunStore(run)
    for k, (start, end) in enumerate([(100.0, 110.0), (101.0, 112.0), (113.0, 125.0)]):
        store.save_trajectory(
            Trajectory(f"t{k}", "v", (), TrajectoryStatus.FINISHED, score=0.0),
            group_id=f"g{k}",
            started_at=start,
        )
        store._db.execute(
            "UPDATE trajectories SET finished_at = ? WHERE trajectory_id = ?", (end, f"t{k}")
        )
    # the reward model's second update is its version 1: its first step had no sample
    for role, version, started, trained, synced in [
        ("policy", 1, 112.0, 114.0, 115.0),
        ("prm", 1, 112.5, 114.5, 116.0),
        ("policy", 2, 125.0, 127.0, 128.0),
        ("prm", 1, 125.5, 127.0, 130.0),
    ]:
        store.add_event(
            UPDATE,
            role,
            {"version": version, "started_at": started, "trained_at": trained, "synced_at": synced},
        )
    spans = [
        _span("setup", 100, 101),
        _span("act", 101, 101.5),
        _span("screenshot", 101.5, 101.6),
        _span("evaluate", 109, 110),
        _span("episode", 100, 110, steps=3, actor=0),
        _span("replica_call", 102, 103, pool="policy"),
        _span("replica_call", 114.2, 114.6, pool="policy"),
        _span("learner_step", 112, 114, role="policy", groups=1, version=1),
        _span("weight_sync", 114, 115, role="policy", version=1),
    ]
    (run / "spans").mkdir()
    (run / "spans" / "spans-1.jsonl").write_text("".join(json.dumps(s) + "\n" for s in spans))
    store.close()
    return run


def test_the_window_runs_from_the_first_rollout_to_the_last_update_synced(tmp_path: Path) -> None:
    assert measured_window(_run(tmp_path)) == (100.0, 130.0)


def test_requests_during_syncs_are_counted_apart() -> None:
    spans = [
        _span("weight_sync", 10, 12, role="policy"),
        _span("weight_sync", 11, 14, role="prm"),  # not the policy's: ignored
        *(_span("replica_call", t - 0.5, t, pool="policy") for t in (5, 11, 13, 20)),
        _span("replica_call", 11, 11.5, pool="prm"),
    ]
    figures = during_syncs(spans)
    assert figures["sync_s"] == 2
    assert figures["policy_calls_per_s_in_sync"] == 0.5  # one answer in 2 s of sync
    assert figures["policy_calls_per_s_outside"] == 3 / 13  # 3 answers in 15 - 2 s


def test_the_latency_file_validates_and_describes_this_fleet(tmp_path: Path) -> None:
    run = _run(tmp_path)
    cfg = load_config(RunConfig, preset="quickstart", overrides=["policy.replicas=2"])
    model = LatencyModel.model_validate(latency_file(run, cfg, tmp_path / "latency.json"))
    assert model == LatencyModel.load(tmp_path / "latency.json")
    # both learners' update of a step, paired by time (first start to last trained)
    # per group, then the rest
    # 2.5 s and 2.0 s of training over the 3 groups rolled out (one trajectory each)
    assert model.learner_s_per_group == 1.5
    assert model.weight_sync_s.median_s == 1.5  # 1.5 s and 3.0 s to both synced, per group
    assert model.episode_steps.max == cfg.episode.max_steps
    assert model.capacity.policy_replicas(cfg.desktops.count) == 2
    assert model.capacity.prm_replicas(cfg.desktops.count) == 1
    assert model.capacity.learner_nodes(cfg.desktops.count) == 1


def test_task_order_and_its_agreement_across_switch_modes(tmp_path: Path) -> None:
    """The groups' variants in the order they opened (their first rollout's start), and
    each switch mode's order compared with async's over the groups both opened."""
    from cua_rl.bench.loop import order_agreement
    from cua_rl.bench.loop_figures import preparation, task_order

    run = tmp_path / "r"
    store = RunStore(run)
    for tid, group, variant, start in [
        ("a", "g2", "v2", 5.0),
        ("b", "g1", "v1", 1.0),
        ("c", "g1", "v1", 2.0),
        ("d", "g3", "v1", 9.0),
    ]:
        store.save_trajectory(
            Trajectory(tid, variant, (), TrajectoryStatus.FINISHED, score=0.0),
            group_id=group,
            started_at=start,
        )
    store.close()
    assert task_order(run) == ["v1", "v2", "v1"]
    result = {
        "async": {"task_order": ["v1", "v2", "v1", "v2"]},
        "async_spares": {"task_order": ["v1", "v2", "v1"]},
        "async_pillow": {"task_order": ["v1", "v1"]},
    }
    assert order_agreement(result) == {
        "async_spares": {"equal": True, "groups_compared": 3, "parted_at": None},
        "async_pillow": {"equal": False, "groups_compared": 2, "parted_at": 1},
    }
    spans = [
        _span("spare_setup", 0, 2),
        _span("spare_setup", 1, 5),
        _span("fork_save", 0, 1, error="x"),
    ]
    assert preparation(spans) == {
        "spare_setup": {"count": 2, "median_s": 3.0},
        "fork_save": {"count": 0, "median_s": 0.0},
        "fork_restore": {"count": 0, "median_s": 0.0},
    }
