"""Spare desktops (`fleet.spare_desktops`) with the real Fleet, GroupScheduler, task
sources, DesktopPool and run store; the desktops are stand-ins whose setup takes a
fixed time (real local desktops: tests/integration/rollout/test_spare_desktops_local.py)."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest

from cua_rl.desktop.file_cache import FileCache
from cua_rl.desktop.pool import DesktopPool, LeasedDesktop
from cua_rl.desktop.providers.base import DesktopHandle, DesktopProvider
from cua_rl.rollout.config import EpisodeConfig, FleetConfig
from cua_rl.rollout.fleet import Fleet
from cua_rl.rollout.guest_desktop import PoolDesktops
from cua_rl.rollout.latency import Dist
from cua_rl.rollout.scheduler import ForecastSource, GroupScheduler
from cua_rl.rollout.simulated import SCREEN, SimClock, SimulatedModelPool, screenshot_png
from cua_rl.runtime.local import task_cycle
from cua_rl.store.async_run_store import AsyncRunStore
from cua_rl.types import Action, TaskVariant

SETUP_S = 0.05


class Handles(DesktopProvider):
    """Desktops that exist as handles only (the pool's own behaviour is under test
    in tests/unit/desktop/test_desktop_pool.py)."""

    type = "memory"

    async def start(self, desktop_id: str) -> DesktopHandle:
        return DesktopHandle(desktop_id, "http://127.0.0.1:9", None, self.type)

    async def reset(self, handle: DesktopHandle) -> DesktopHandle:
        return handle

    async def stop(self, handle: DesktopHandle) -> None:
        return None

    async def health(self, handle: DesktopHandle) -> bool:
        return True


class StandIn:
    """An episode's desktop whose setup takes SETUP_S; records who set it up for what."""

    setups: Counter[str] = Counter()
    episodes: list[tuple[str, str]] = []
    """(variant the episode ran, variant the desktop was set up for)"""

    def __init__(self, leased: LeasedDesktop) -> None:
        self.handle = leased.handle
        self.screen = SCREEN
        self.prepared_for: str | None = None
        self.pending: asyncio.Task[None] | None = None
        self.ticket = self.forks = None

    async def finish_pending(self, cancel: bool = False) -> None:
        pending, self.pending = self.pending, None
        if pending is not None:
            if cancel:
                pending.cancel()
            await asyncio.wait({pending})

    async def setup(self, variant: TaskVariant, *, reset: bool = True) -> None:
        self.prepared_for = None
        await asyncio.sleep(SETUP_S)
        self.prepared_for = variant.variant_id
        StandIn.setups[variant.variant_id] += 1

    async def prepare(self, variant: TaskVariant) -> None:
        await self.finish_pending()
        if self.prepared_for != variant.variant_id:
            await self.setup(variant)
        StandIn.episodes.append((variant.variant_id, str(self.prepared_for)))

    def discard_work(self) -> None:
        return None

    async def screenshot(self) -> bytes:
        return screenshot_png()

    async def act(self, code: str) -> None:
        await asyncio.sleep(0.005)

    async def evaluate(self, variant: TaskVariant, last_action: Action | None) -> float:
        self.prepared_for = None
        return 0.0


def variant(task: str) -> TaskVariant:
    return TaskVariant(
        task_id=task,
        domain="os",
        instruction=f"do {task}",
        config=(),
        evaluator={"func": "infeasible"},
        evaluator_name=task,
    )


class Recording:
    """Wraps a task source: what each ask gave, in order; forecasts may be wrong."""

    def __init__(self, source: ForecastSource, lie: bool = False) -> None:
        self.source, self.lie, self.given = source, lie, []

    async def __call__(self) -> TaskVariant | None:
        got = await self.source()
        if got is not None:
            self.given.append(got.variant_id)
        return got

    def upcoming(self, groups: int) -> list[TaskVariant]:
        told = self.source.upcoming(groups)
        return [variant("elsewhere")] * len(told) if self.lie else told


async def run_fleet(
    tmp_path: Path, spares: int, *, lie: bool = False, groups: int = 8
) -> tuple[list[str], PoolDesktops, Counter[str]]:
    StandIn.setups, StandIn.episodes = Counter(), []
    source = Recording(task_cycle([variant("a"), variant("b"), variant("c")], groups), lie)
    actors = 2
    pool = DesktopPool(Handles(), actors + spares, id_prefix=f"s{spares}", health_interval_s=3600)
    await pool.start()
    desktops = PoolDesktops(
        pool,
        cache=FileCache(tmp_path / "cache"),
        work_root=tmp_path,
        cfg=EpisodeConfig(),
        spares=spares,
        make=StandIn,
    )
    clock = SimClock(0.01, seed=0)
    policy = SimulatedModelPool(
        1,
        8,
        Dist(median_s=0.5),
        clock,
        slowdown=0.0,
        tokens=4,
        version=lambda: 0,
        episode_length=lambda rng: 3,
        name="policy",
    )
    store = AsyncRunStore.open(tmp_path / f"run-{spares}-{lie}")
    try:
        fleet = Fleet(
            GroupScheduler(source, 2),
            desktops,
            policy,
            store,  # type: ignore[arg-type]
            EpisodeConfig(max_steps=3),
            FleetConfig(actors=actors, group_size=2),
            seed=7,
        )
        counts = await asyncio.wait_for(fleet.run(), 60)
    finally:
        await store.close()
        await pool.close()
    return source.given, desktops, counts


async def test_spares_take_setups_off_the_actors_and_keep_the_task_order(tmp_path: Path) -> None:
    order_off, _, counts_off = await run_fleet(tmp_path, 0)
    setups_off = sum(StandIn.setups.values())
    order_on, desktops, counts_on = await run_fleet(tmp_path, 2)
    assert order_on == order_off == [f"{t}:{t}" for t in "abcabcab"]
    assert counts_on["episodes"] == counts_off["episodes"] == 16
    spares = desktops.figures()
    # every episode started on a desktop set up for its own variant
    assert all(ran == prepared for ran, prepared in StandIn.episodes)
    # most rollouts found their desktop set up ahead (ready or claimed while prepared)
    assert spares["spare_hits"] + spares["spare_claims"] >= 12, spares
    assert spares["spare_prepared"] >= spares["spare_hits"] + spares["spare_claims"]
    assert setups_off == 16


async def test_a_wrong_forecast_never_changes_what_tickets_get(tmp_path: Path) -> None:
    """The look-ahead only reads: with a source whose forecast is always wrong, tickets
    get exactly what the source gives when asked, in order, and each episode still
    runs on a desktop set up for its own variant (spares for the forecast are set up
    again for what is queued, or stolen)."""
    order, desktops, counts = await run_fleet(tmp_path, 2, lie=True)
    assert order == [f"{t}:{t}" for t in "abcabcab"]
    assert counts["episodes"] == 16
    assert all(ran == prepared for ran, prepared in StandIn.episodes)
    assert StandIn.setups["elsewhere:elsewhere"] >= 1  # it did prepare for the lie


def test_upcoming_reads_the_queue_then_the_forecast_and_asks_nothing() -> None:
    asked = []

    async def give() -> TaskVariant | None:
        asked.append(1)
        return variant("x")

    source = ForecastSource(give, lambda k: [variant(f"f{i}") for i in range(k)])
    scheduler = GroupScheduler(source, 3, max_groups=2)
    ahead = scheduler.upcoming(7)
    assert [u.variant.task_id for u in ahead] == ["f0"] * 3 + ["f1"] * 3
    assert [u.group_key for u in ahead] == ["next-0"] * 3 + ["next-1"] * 3
    assert asked == []
    ticket = asyncio.run(scheduler.next_ticket())
    assert ticket is not None and asked == [1]
    ahead = scheduler.upcoming(10)
    assert [(u.variant.task_id, u.group_id) for u in ahead[:2]] == [("x", ticket.group_id)] * 2
    assert [u.variant.task_id for u in ahead[2:]] == ["f0"] * 3  # max_groups: one more
    assert asked == [1]


def test_task_cycle_forecasts_what_it_gives() -> None:
    source = task_cycle([variant("a"), variant("b")], 3)
    assert [v.task_id for v in source.upcoming(5)] == ["a", "b", "a"]  # type: ignore[attr-defined]
    assert asyncio.run(source()).task_id == "a"  # type: ignore[union-attr]
    assert [v.task_id for v in source.upcoming(5)] == ["b", "a"]  # type: ignore[attr-defined]


@pytest.mark.parametrize("spares", [1, 3])
async def test_the_preparer_keeps_within_its_bound(tmp_path: Path, spares: int) -> None:
    """Ready plus preparing spares never exceed `spare_desktops`, whatever the queue."""
    pool = DesktopPool(Handles(), 2 + spares, id_prefix="b", health_interval_s=3600)
    await pool.start()
    desktops = PoolDesktops(
        pool,
        cache=FileCache(tmp_path),
        work_root=tmp_path,
        cfg=EpisodeConfig(),
        spares=spares,
        make=StandIn,
    )
    scheduler = GroupScheduler(task_cycle([variant("a"), variant("b")], 10), 4)
    held: list[int] = []
    async with desktops.ahead(scheduler):
        assert desktops.spares is not None
        for _ in range(20):
            await asyncio.sleep(0.02)
            held.append(len(desktops.spares._ready) + len(desktops.spares._preparing))
    await pool.close()
    assert max(held) == spares and pool.idle_count == 0
