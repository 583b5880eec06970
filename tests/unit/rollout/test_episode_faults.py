"""Faults from outside the process abort at most one episode (policy, screenshot) or
one verdict (reward model): a misbehaving model server on 127.0.0.1 and a desktop
that returns a truncated screenshot, with the real actor, judge and run store."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from tests_support.fake_model_server import FakeModelConfig, FakeModelServer

from cua_rl.errors import CorruptImageError, EpisodeAborted, SetupStepError
from cua_rl.inference.config import InferencePoolConfig
from cua_rl.inference.pool import InferencePool
from cua_rl.reward.config import JudgeConfig
from cua_rl.reward.judge import StreamingJudge
from cua_rl.rollout.actor import run_episode
from cua_rl.rollout.config import EpisodeConfig
from cua_rl.rollout.latency import Dist, LatencyModel
from cua_rl.rollout.simulated import SimClock, SimulatedDesktop, SimulatedDesktops
from cua_rl.store.async_run_store import AsyncRunStore
from cua_rl.store.run_store import RunStore
from cua_rl.types import TaskVariant, TrajectoryStatus

FAST = Dist(median_s=0.001, sigma=0.0)
VARIANT = TaskVariant(
    task_id="t0",
    domain="simulated",
    evaluator_name="default",
    instruction="do it",
    config=(),
    evaluator={"func": "simulated"},
)


@pytest.fixture
async def server() -> AsyncIterator[FakeModelServer]:
    srv = FakeModelServer()
    await srv.start()
    yield srv
    await srv.stop()


def _desktops() -> SimulatedDesktops:
    model = LatencyModel(reset_s=FAST, act_s=FAST, screenshot_s=FAST, evaluate_s=FAST)
    return SimulatedDesktops(1, model, SimClock(1.0, seed=0))


class TruncatedScreenDesktop(SimulatedDesktop):
    """A desktop whose guest sends a cut PNG (the transfer ended early)."""

    async def screenshot(self) -> bytes:
        return (await super().screenshot())[:-100]


async def _episode(
    tmp_path, server: FakeModelServer, desktop_type=SimulatedDesktop, prm_mode: str = "ok"
):
    policy = InferencePool([server.url], InferencePoolConfig(max_attempts=2))
    prm_server = FakeModelServer(FakeModelConfig(fault=prm_mode))
    await prm_server.start()
    prm = InferencePool([prm_server.url])
    store = AsyncRunStore.open(tmp_path)
    judge = StreamingJudge(prm, store, JudgeConfig())
    try:
        desktop = desktop_type(_desktops())
        traj = await run_episode(
            VARIANT, desktop, policy, store, EpisodeConfig(max_steps=3), judge=judge
        )
        verdicts = await judge.collect(traj.id)
        return traj, verdicts, judge
    finally:
        await judge.close()
        await store.close()
        for pool in (policy, prm):
            await pool.close()
        await prm_server.stop()


@pytest.mark.parametrize("mode", ["empty_choices", "missing_logprobs", "bad_version"])
async def test_bad_policy_answer_aborts_only_the_episode(tmp_path, server, mode) -> None:
    server.config.fault = mode
    with pytest.raises(EpisodeAborted, match=server.url):
        await _episode(tmp_path, server)
    store = RunStore(tmp_path)
    try:
        (record,) = store.trajectory_records()
    finally:
        store.close()
    assert record["status"] == TrajectoryStatus.ABORTED.value


async def test_corrupt_screenshot_aborts_only_the_episode(tmp_path, server) -> None:
    with pytest.raises(EpisodeAborted, match="truncated") as caught:
        await _episode(tmp_path, server, TruncatedScreenDesktop)
    assert isinstance(caught.value.__cause__, CorruptImageError)
    assert server.requests == 0  # the cut image never reached the model


@pytest.mark.parametrize("mode", ["wrong_shape", "not_json"])
async def test_bad_reward_model_answer_costs_only_its_verdict(tmp_path, server, mode) -> None:
    traj, verdicts, judge = await _episode(tmp_path, server, prm_mode=mode)
    assert traj.status == TrajectoryStatus.FINISHED and len(traj.steps) == 1
    assert verdicts == [] and judge.counts["judge_failures"] == 1
    store = RunStore(tmp_path)
    try:
        assert store.counters()["judge_failures"] == 1
    finally:
        store.close()


class BrokenSetupDesktop(SimulatedDesktop):
    """A desktop on which the task's setup fails (an app that cannot launch)."""

    async def prepare(self, variant: TaskVariant) -> None:
        raise SetupStepError("task t0: config[0] ('launch'): google-chrome: not found")


async def test_failed_setup_is_recorded_with_its_reason_and_not_retried(tmp_path, server) -> None:
    with pytest.raises(EpisodeAborted, match="google-chrome") as caught:
        await _episode(tmp_path, server, BrokenSetupDesktop)
    assert caught.value.permanent  # the fleet gives it up instead of re-queueing it
    assert server.requests == 0
    store = RunStore(tmp_path)
    try:
        (record,) = store.trajectory_records()
    finally:
        store.close()
    assert record["status"] == TrajectoryStatus.SETUP_FAILED.value
    assert "google-chrome: not found" in record["error"]
