"""A poisoned task variant (one that keeps aborting) is set aside with its reason and
the run goes on with the others; every give-up is recorded with its reason."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from cua_rl.errors import DesktopError, GuestUnavailable
from cua_rl.rollout.config import EpisodeConfig, FleetConfig
from cua_rl.rollout.fleet import Fleet
from cua_rl.rollout.latency import Dist, LatencyModel
from cua_rl.rollout.scheduler import GroupScheduler
from cua_rl.rollout.simulated import SimClock, SimulatedDesktop, SimulatedDesktops
from cua_rl.rollout.simulated import SimulatedModelPool as Pool
from cua_rl.store.async_run_store import AsyncRunStore
from cua_rl.store.run_store import RunStore
from cua_rl.types import TaskVariant

FAST = Dist(median_s=0.001, sigma=0.0)


def _variant(task_id: str) -> TaskVariant:
    return TaskVariant(
        task_id=task_id,
        domain="simulated",
        evaluator_name="default",
        instruction="do it",
        config=(),
        evaluator={"func": "simulated"},
    )


POISONED, HEALTHY = _variant("poisoned"), _variant("healthy")


class PoisonDesktop(SimulatedDesktop):
    error: Exception = GuestUnavailable("http://127.0.0.1:9/setup/launch: connection refused")

    async def prepare(self, variant: TaskVariant) -> None:
        if variant.task_id == POISONED.task_id:
            raise self.error
        await super().prepare(variant)


class PoisonDesktops(SimulatedDesktops):
    @asynccontextmanager
    async def lease(self, ticket: object = None) -> AsyncIterator[SimulatedDesktop]:
        async with super().lease():
            yield PoisonDesktop(self)


@pytest.mark.parametrize(
    "error",
    [
        GuestUnavailable("http://127.0.0.1:9/setup/launch: connection refused"),
        # a reset that cannot start the desktop again aborts the episode, not the run
        DesktopError("desktop 'pool-0' did not start: session launcher exited with 1"),
    ],
)
async def test_poisoned_variant_is_set_aside_and_the_run_goes_on(
    tmp_path, monkeypatch, error
) -> None:
    monkeypatch.setattr(PoisonDesktop, "error", error)
    clock = SimClock(1.0, seed=0)
    model = LatencyModel(reset_s=FAST, act_s=FAST, screenshot_s=FAST, evaluate_s=FAST)
    policy = Pool(
        1, 4, FAST, clock, slowdown=0.0, tokens=4, version=lambda: 0, episode_length=lambda rng: 2
    )
    variants = iter([POISONED, HEALTHY, POISONED, HEALTHY])

    async def source() -> TaskVariant | None:
        return next(variants, None)

    store = AsyncRunStore.open(tmp_path)
    cfg = FleetConfig(actors=1, group_size=2, max_attempts=3, set_aside_after=4)
    fleet = Fleet(
        GroupScheduler(source, 2),
        PoisonDesktops(1, model, clock),
        policy,
        store,
        EpisodeConfig(max_steps=5),
        cfg,
    )
    try:
        counts = await fleet.run()
    finally:
        await store.close()
    # slot 0: 3 attempts then given up; slot 1: the 4th abort in a row sets it aside;
    # the second poisoned group is given up without running.
    assert counts["aborted"] == 4 and counts["set_aside"] == 1
    assert counts["gave_up"] == 4 and counts["episodes"] == 4
    assert set(fleet.set_aside) == {POISONED.variant_id}
    reader = RunStore.read_only(tmp_path)
    summary = reader.summary()
    reader.close()
    assert summary["trajectories"] == 4 and summary["aborted"] == 4
    assert summary["gave_up"] == 4
    assert str(error) in summary["set_aside"][POISONED.variant_id]
    (reason,) = summary["reasons"]["abort"]
    assert reason.startswith(type(error).__name__)
