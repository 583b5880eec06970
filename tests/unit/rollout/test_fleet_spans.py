"""Spans of a short real run: the real Fleet, run_episode, StreamingJudge, run store
and LearnerService (with a recording engine) on simulated desktops and model
pools. Its profile must account for the episodes' wall time within 5 %, keep busy
fractions in [0, 1], and fit a latency model the simulator accepts."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests_support.recording_engine import RecordingEngine
from tests_support.span_windows import episode_windows, intersection_s

from cua_rl import spans
from cua_rl.bench.fleet_cluster import VARIANTS
from cua_rl.learner.config import LearnerLoopConfig
from cua_rl.learner.service import LearnerService
from cua_rl.report.loop_profile import latency_model, load_spans, profile, update_windows
from cua_rl.reward.config import JudgeConfig
from cua_rl.reward.judge import StreamingJudge
from cua_rl.rollout.config import EpisodeConfig, FleetConfig
from cua_rl.rollout.fleet import Fleet
from cua_rl.rollout.latency import Dist, LatencyModel
from cua_rl.rollout.scheduler import GroupScheduler
from cua_rl.rollout.simulated import SimClock, SimulatedDesktops, SimulatedModelPool
from cua_rl.staleness_gate import VersionGate
from cua_rl.store.async_run_store import AsyncRunStore
from cua_rl.types import GroupRecord, StepSample, TaskVariant

ACTORS = 6


def ms(median: float) -> Dist:
    return Dist(median_s=median / 1000, sigma=0.2)


class SlowEngine(RecordingEngine):
    """Training takes a little time on the learner's thread, as a real one does."""

    def train_step(self, batch: list[StepSample]) -> dict[str, float]:
        time.sleep(0.02)
        return super().train_step(batch)


@pytest.fixture(autouse=True)
def _recorder_off() -> Iterator[None]:
    spans.close()
    yield
    spans.close()


async def _run(run_dir: Path) -> dict[str, Any]:
    model = LatencyModel(reset_s=ms(20), act_s=ms(10), screenshot_s=ms(5), evaluate_s=ms(15))
    clock = SimClock(1.0, seed=3)
    gate = VersionGate(2)
    policy = SimulatedModelPool(
        2,
        2,
        ms(15),
        clock,
        slowdown=0.2,
        tokens=4,
        version=lambda: gate.serving_version,
        name="policy",
        episode_length=lambda rng: rng.randint(2, 6),
    )
    prm = SimulatedModelPool(
        1, 4, ms(15), clock, slowdown=0.2, tokens=4, version=lambda: 0, name="prm"
    )
    store = AsyncRunStore.open(run_dir)
    judge = StreamingJudge(prm, store, JudgeConfig(max_in_flight=4))
    learner = LearnerService(
        "policy",
        SlowEngine(),
        store,  # type: ignore[arg-type]
        LearnerLoopConfig(queue_updates=4),
        checkpoint_dir=run_dir / "ckpt",
        tasks_per_update=2,
        eta=100,
    )
    variants = itertools.cycle(VARIANTS)

    async def source() -> TaskVariant:
        return next(variants)

    async def on_group(group: GroupRecord) -> None:
        await learner.submit(
            [
                StepSample(
                    (), s.token_ids, s.logprobs, t.policy_version_at_start, 1.0, t.id, s.index
                )
                for t in group.trajectories
                for s in t.steps
            ],
            group.group_id,
        )

    fleet = Fleet(
        GroupScheduler(source, 2, max_groups=12),
        SimulatedDesktops(ACTORS, model, clock),
        policy,
        store,
        EpisodeConfig(max_steps=10),
        FleetConfig(actors=ACTORS, group_size=2),
        judge=judge,
        gate=gate,
        on_group=on_group,
    )
    try:
        training = asyncio.create_task(learner.run())
        counts = await fleet.run()
        await learner.finish()
        await training
    finally:
        await learner.close()
        await judge.close()
        await store.close()
    return dict(counts)


async def test_a_recorded_fleet_run_profiles_consistently(tmp_path: Path) -> None:
    with spans.recording(tmp_path):
        counts = await _run(tmp_path)
    recorded = load_spans(tmp_path)
    p = profile(recorded)
    assert p["episodes"] == counts["episodes"] == 24 and p["steps"] == counts["steps"]
    assert p["desktops"] == ACTORS
    busy = [
        p["desktop_busy"],
        *(pool["busy"] for pool in p["pools"].values()),
        *(learner["busy"] for learner in p["learners"].values()),
    ]
    assert all(0.0 < b <= 1.0 for b in busy), busy
    assert {name: pool["replicas"] for name, pool in p["pools"].items()} == {"policy": 2, "prm": 1}
    assert p["pools"]["policy"]["calls"] == counts["steps"] == p["pools"]["prm"]["calls"]
    breakdown = p["breakdown"]
    assert breakdown["sum_error"] < 0.05, breakdown
    for part in ("setup", "policy_call", "act", "screenshot", "images", "evaluate", "save"):
        assert breakdown["parts_s"][part] > 0, part
    assert p["waits_s"]["ticket_wait"] > 0  # actors find no ticket once max_groups is out
    lag = p["lag"]["policy"]
    assert lag["samples"] == lag["used"] == counts["steps"]  # 12 groups, 6 updates
    assert p["learners"]["policy"]["updates"] == 6 and lag["max"] >= 1
    # asynchronous: rollouts went on while the learner trained
    assert intersection_s(episode_windows(recorded), update_windows(recorded)) > 0
    model = LatencyModel.model_validate(latency_model(recorded))
    assert 0.01 < model.reset_s.median_s < 0.05 and 0.005 < model.policy_s.median_s < 0.05
    assert 2 <= model.episode_steps.min <= model.episode_steps.max <= 6


async def test_a_run_with_spans_off_writes_no_span_file(tmp_path: Path) -> None:
    with spans.recording(None):
        await _run(tmp_path)
    assert not (tmp_path / "spans").exists()
