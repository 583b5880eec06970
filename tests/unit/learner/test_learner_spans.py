"""Spans of the learner side and of a real inference pool: a learner update with its
checkpoint and staggered weight sync to two model servers on 127.0.0.1
(tests_support/fake_model_server.py), and the pool's replica calls and waits."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests_support.fake_model_server import FakeModelConfig, FakeModelServer
from tests_support.recording_engine import RecordingEngine

from cua_rl import spans
from cua_rl.inference.pool import InferencePool
from cua_rl.inference.replica_set import ReplicaSet
from cua_rl.learner.config import LearnerLoopConfig, WeightSyncConfig
from cua_rl.learner.service import LearnerService
from cua_rl.learner.weight_sync import WeightSync
from cua_rl.report.loop_profile import load_spans, profile, sync_windows
from cua_rl.staleness_gate import VersionGate
from cua_rl.store.async_run_store import AsyncRunStore
from cua_rl.types import StepSample

MESSAGES = [{"role": "user", "content": "hi"}]


class ExportingEngine(RecordingEngine):
    """A recording engine that can hand its (dummy) weights to a checkpoint-mode sync."""

    def export_weights(self, path: Path) -> Path:
        path.mkdir(parents=True, exist_ok=True)
        (path / "config.json").write_text("{}")
        return path


@pytest.fixture(autouse=True)
def _recorder_off() -> Iterator[None]:
    spans.close()
    yield
    spans.close()


async def test_update_checkpoint_sync_and_pool_calls_are_recorded(tmp_path: Path) -> None:
    servers = [FakeModelServer(FakeModelConfig(chat_s=0.01, update_s=0.05)) for _ in range(2)]
    for server in servers:
        await server.start()
    replicas = ReplicaSet.from_urls(
        [s.url for s in servers], timeout_s=10.0, probe_interval_s=0.05, name="policy"
    )
    pool = InferencePool(replicas, wait_for_replica_s=10.0)
    sync = WeightSync(
        replicas,
        WeightSyncConfig(mode="checkpoint", staggered=True, timeout_s=10.0),
        tmp_path / "exports",
    )
    store = AsyncRunStore.open(tmp_path / "run")
    gate = VersionGate(2)
    learner = LearnerService(
        "policy",
        ExportingEngine(),
        store,  # type: ignore[arg-type]
        LearnerLoopConfig(),
        checkpoint_dir=tmp_path / "ckpt",
        sync=sync,
        gate=gate,
        eta=5,
    )
    old = [
        StepSample((), (1,), (-0.1,), version, 1.0, "t", i)
        for i, version in enumerate((0, 0, 0, 1))
    ]
    try:
        with spans.recording(tmp_path / "run"):
            await pool.chat(MESSAGES, session_key="episode-1")
            for replica in replicas.replicas.values():  # both down: the next call waits
                replicas.mark_down(replica, "test")
            await pool.chat(MESSAGES, session_key="episode-1")
            run = asyncio.create_task(learner.run(max_updates=2))
            await learner.submit(old[:2], "g0")
            await learner.submit(old[2:], "g1")
            await learner.finish()
            await run
    finally:
        await learner.close()
        await store.close()
        await pool.close()
        for server in servers:
            await server.stop()
    recorded = load_spans(tmp_path / "run")
    kinds = [s["kind"] for s in recorded]
    assert kinds.count("pool") == 1 and kinds.count("replica_call") == 2
    assert {s["replica"] for s in recorded if s["kind"] == "replica_call"} <= set(replicas.urls)
    waits = [s for s in recorded if s["kind"] == "replica_wait"]
    assert waits and all(s["tid"] == "episode-1" and s["pool"] == "policy" for s in waits)
    steps = [s for s in recorded if s["kind"] == "learner_step"]
    assert [(s["version"], s["samples"], s["used"], s["groups"]) for s in steps] == [
        (1, 2, 2, 1),
        (2, 2, 2, 1),
    ]
    # lag: learner version before the update minus each sample's behaviour version
    assert [(s["lag_mean"], s["lag_max"]) for s in steps] == [(0.0, 0), (0.5, 1)]
    assert [s["version"] for s in recorded if s["kind"] == "checkpoint"] == [1, 2]
    assert [w.label for w in sync_windows(recorded)] == ["1", "2"]
    per_replica = [s for s in recorded if s["kind"] == "replica_sync"]
    assert len(per_replica) == 4 and {s["pool"] for s in per_replica} == {"policy"}
    for window in sync_windows(recorded):
        mine = [s for s in per_replica if str(s["version"]) == window.label]
        assert all(window.start <= s["start"] <= s["end"] <= window.end for s in mine)
    p = profile(recorded)
    assert p["lag"]["policy"] == {"samples": 4, "used": 4, "mean": 0.25, "max": 1.0}
    assert p["pools"]["policy"]["replicas"] == 2 and 0 < p["pools"]["policy"]["busy"] <= 1
    assert 0 < p["learners"]["policy"]["busy"] <= 1 and p["policy_replica_wait_s"] > 0
