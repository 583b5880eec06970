"""A fleet node dies mid-run (`runtime: ray` on a real 3-node Ray cluster on this
machine: the head, where the driver, its learner and model servers run, and two
fleet nodes with one worker and one local desktop each). After the first good
trajectory one fleet node is killed (SIGKILL of its raylet, object store and
workers) and another joins: the run re-queues the lost worker's rollouts, goes on
with the other worker, starts a replacement on the new node, and finishes its
budget with nothing stored lost, no update twice and nothing left running."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cua_rl.bench.faults.cases import good_trajectories
from cua_rl.bench.faults.watched_run import RunProcess, poll_until
from cua_rl.bench.soak.ledger import trajectories_lost, updates_duplicated
from cua_rl.runtime.ray.local_cluster import LocalCluster, cluster_overrides
from cua_rl.store.run_store import RunStore

pytestmark = [pytest.mark.desktop, pytest.mark.model]

STALL_S = 180.0
"""The run must store a new good trajectory (or end) at least this often: the
waits are bounded by progress, not by how fast an idle machine would be."""
GROUPS = 4


def wait_while_progressing(run: RunProcess, stall_s: float) -> int | None:
    """Wait for the run to exit while it keeps storing good trajectories; its exit
    status, or None when it stalled for `stall_s`."""
    seen, last = -1, time.monotonic()
    for _ in range(100_000):  # bounded: each turn sleeps or returns
        if run.proc is not None and run.proc.poll() is not None:
            return run.proc.returncode
        run.descendants()
        now_good = good_trajectories(run.run_dir)
        if now_good > seen:
            seen, last = now_good, time.monotonic()
        elif time.monotonic() - last > stall_s:
            return None
        time.sleep(0.5)
    return None


def test_a_killed_fleet_node_is_replaced_and_the_run_finishes_its_budget(
    primed_tiny_model_dir: Path, local_desktops: None, tmp_path: Path
) -> None:
    pytest.importorskip("ray")
    state_dir = tmp_path / "state"
    cluster = LocalCluster(fleet_nodes=2)
    try:
        cluster.start_head()
        run = RunProcess(
            "train",
            tmp_path / "run",
            state_dir,
            [
                *cluster_overrides(cluster, str(state_dir)),
                f"tiny_model_dir={primed_tiny_model_dir}",
                "metrics.live=false",
                "metrics.tensorboard=false",
                "episode.max_steps=1",
                "judge.enabled=false",
                f"fleet.max_groups={GROUPS}",
                "train.tasks_per_update=2",
                "train.max_policy_updates=1000",
                "ray.replace_timeout_s=120",
            ],
        ).start()
        try:
            for _ in range(cluster.fleet_nodes):  # while the run starts its model servers
                cluster.add_fleet_node()
            first = poll_until(
                lambda: good_trajectories(run.run_dir) > 0 or run.proc.poll() is not None,
                STALL_S,
                0.5,
            )  # type: ignore[union-attr]
            assert first and run.proc.poll() is None, run.error_lines()  # type: ignore[union-attr]
            killed_at = time.time()
            cluster.kill_fleet_node(0)
            cluster.add_fleet_node()
            code = wait_while_progressing(run, STALL_S)
        finally:
            if run.proc is not None and run.proc.poll() is None:
                run.kill_tree()
            cluster.watch()
    finally:
        cluster.shutdown()
    assert code == 0, run.error_lines()

    store = RunStore.read_only(run.run_dir)
    try:
        lost = store.events("worker_lost")
        replaced = store.events("worker_replaced")
        counters = store.counters()
        records = store.trajectory_records()
    finally:
        store.close()
    assert len(lost) == 1 and len(replaced) == 1, (lost, replaced)
    assert counters["workers_lost"] == 1 and counters["workers_replaced"] == 1
    replacement = replaced[0]["data"]["worker"]
    assert counters[f"episodes/{replacement}"] > 0  # it ran episodes after the kill
    assert any(r["started_at"] > killed_at for r in records if r["status"] != "aborted")
    ledger = trajectories_lost(run.run_dir, group_size=2, stopped_at=time.time())
    assert ledger["total"] == 0 and ledger["groups_routed"] == GROUPS, ledger
    assert updates_duplicated(run.run_dir)["total"] == 0
    run.seen.pop(run.pid, None)
    assert run.leftovers() == {"processes": {}, "desktops": []}
    assert cluster.leftovers() == {}
