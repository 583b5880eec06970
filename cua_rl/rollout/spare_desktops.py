"""Desktops set up ahead of the actors (`fleet.spare_desktops`).

The run starts `fleet.spare_desktops` desktops beside the actors' (`desktops.count`).
A preparer follows the scheduler's look-ahead (`GroupScheduler.upcoming`: its queued
tickets, then the task source's forecast of the next groups) and, while fewer than
`spare_desktops` desktops wait ready or are being prepared, takes an idle desktop
from the pool and resets and sets it up for the first upcoming rollout no spare
covers yet. An actor whose ticket's variant has a ready spare takes it and starts
its episode at once; one being prepared for it is claimed, and the episode waits for
the rest of its setup (in its own `setup` span, as a wait for setup); else the actor
leases a desktop and sets it up itself, as without spares.

Invariants:
- the look-ahead only reads: the task source is asked for a group when an actor
  needs one, exactly as without spares, so every ticket gets the task and variant it
  would get without them (Algorithm 2's decisions stay in order);
- ready plus preparing desktops never exceed `spare_desktops`, and the preparer only
  takes a desktop no actor is waiting for (`DesktopPool.try_acquire`); so the pool
  of actors + spares desktops always has one for an actor, and an actor that finds
  none idle takes (steals) the oldest ready spare and sets it up again;
- a spare whose setup failed goes back to the pool (unhealthy when the desktop
  itself failed, so it is replaced); the ticket's actor then sets up itself and
  meets the task's failure as without spares;
- with `fleet.fork_groups`, a group whose task forks needs one spare (its setter's),
  not one per rollout: the rest restore the fork point.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from cua_rl import spans
from cua_rl.desktop.pool import DesktopPool, LeasedDesktop
from cua_rl.rollout.group_forks import GroupForks
from cua_rl.rollout.prepared import PreparedDesktop, desktop_failed
from cua_rl.rollout.scheduler import RolloutTicket, Upcoming
from cua_rl.types import TaskVariant

log = logging.getLogger(__name__)

POLL_S = 0.25
"""The preparer looks at the scheduler at least this often (and at once when a
desktop comes back)."""


@dataclass(eq=False)
class _Prep:
    variant_id: str
    group_key: str
    desktop: PreparedDesktop
    claimed: bool = False
    task: asyncio.Task[None] | None = field(default=None, repr=False)


class SpareDesktops:
    """Up to `spares` desktops set up ahead for the scheduler's upcoming rollouts."""

    def __init__(
        self,
        pool: DesktopPool,
        make_desktop: Callable[[LeasedDesktop], PreparedDesktop],
        spares: int,
        forks: GroupForks | None = None,
    ) -> None:
        self.pool = pool
        self.make_desktop = make_desktop
        self.spares = spares
        self.forks = forks
        self._ready: list[tuple[str, PreparedDesktop]] = []
        """(group key it was prepared for, desktop), oldest first."""
        self._preparing: list[_Prep] = []
        self._upcoming: Callable[[int], list[Upcoming]] | None = None
        self._group_size = 1
        self._kick = asyncio.Event()
        self._loop: asyncio.Task[None] | None = None
        self._closing = False
        self.counts: Counter[str] = Counter()
        """spare_hits (ready), spare_claims (waited for one being prepared),
        spare_misses, spare_stolen, spare_prepared, spare_failed."""

    def watch(self, upcoming: Callable[[int], list[Upcoming]], group_size: int = 1) -> None:
        """Start preparing for `upcoming` (the scheduler's look-ahead)."""
        self._upcoming = upcoming
        self._group_size = max(1, group_size)
        if self._loop is None:
            self._loop = asyncio.create_task(self._run(), name="spare-desktops")

    def kick(self) -> None:
        self._kick.set()

    async def take(self, ticket: RolloutTicket) -> PreparedDesktop | None:
        """A desktop set up for the ticket's variant (ready, or claimed while being
        prepared and waited for), or None: the actor leases one and sets it up."""
        key = ticket.variant.variant_id
        for k, (_, desktop) in enumerate(self._ready):
            if desktop.prepared_for == key:
                del self._ready[k]
                self.counts["spare_hits"] += 1
                self.kick()
                return desktop
        for prep in self._preparing:
            if prep.variant_id == key and not prep.claimed and prep.task is not None:
                # the actor gets the desktop now and waits for its setup in its episode's
                # `setup` span (PreparedDesktop.prepare awaits `pending`): a wait for setup
                prep.claimed = True
                prep.desktop.pending = prep.task
                self.counts["spare_claims"] += 1
                return prep.desktop
        self.counts["spare_misses"] += 1
        return None

    def steal(self) -> PreparedDesktop | None:
        """The oldest ready spare, for an actor that finds no idle desktop."""
        if not self._ready:
            return None
        self.counts["spare_stolen"] += 1
        self.kick()
        return self._ready.pop(0)[1]

    async def close(self) -> None:
        """Stop preparing; ready spares go back to the pool."""
        self._closing = True
        tasks = [
            t
            for t in (self._loop, *(p.task for p in self._preparing if not p.claimed))
            if t is not None
        ]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._loop = None
        for _, desktop in self._ready:
            desktop.discard_work()
            with contextlib.suppress(Exception):  # a closing pool refuses nothing
                self.pool.release(desktop.handle, True)
        self._ready.clear()

    # the preparer ----------------------------------------------------------------------

    async def _run(self) -> None:
        while not self._closing:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(POLL_S):  # not wait_for: 3.11's can swallow a cancel
                    await self._kick.wait()
            self._kick.clear()
            self._fill()

    def wanted(self) -> list[Upcoming]:
        """The upcoming rollouts that should have a spare, in order: each queued or
        forecast rollout, but one per group for groups whose task forks (the others
        restore the fork point) and none for a group that has its fork point."""
        assert self._upcoming is not None
        window = self._upcoming(self.spares * self._group_size + self.spares)
        out: list[Upcoming] = []
        seen_groups: set[str] = set()
        for item in window:
            if self.forks is not None and self.forks.applies(item.variant):
                if item.group_key in seen_groups or (
                    item.group_id is not None and self.forks.has_point(item.group_id)
                ):
                    continue
                seen_groups.add(item.group_key)
            out.append(item)
        return out

    def _fill(self) -> None:
        """Start preparations for wanted rollouts no spare covers, within the bound."""
        if self._upcoming is None:
            return
        covered = Counter(d.prepared_for for _, d in self._ready)
        covered.update(p.variant_id for p in self._preparing)
        unmet: list[Upcoming] = []
        for item in self.wanted():
            key = item.variant.variant_id
            if covered[key] > 0:
                covered[key] -= 1
            else:
                unmet.append(item)
        stale = [k for k, (_, d) in enumerate(self._ready) if covered[d.prepared_for] > 0]
        for item in unmet:
            held = len(self._ready) + len(self._preparing)
            if held < self.spares:
                leased = self.pool.try_acquire()
                if leased is None:
                    return
                self._start(item, self.make_desktop(leased))
            elif stale:  # a spare no upcoming rollout wants: set it up again
                _, desktop = self._ready.pop(stale.pop(0))
                stale = [k - 1 for k in stale]
                self.counts["spare_redone"] += 1
                self._start(item, desktop)
            else:
                return

    def _start(self, item: Upcoming, desktop: PreparedDesktop) -> None:
        prep = _Prep(item.variant.variant_id, item.group_key, desktop)
        prep.task = asyncio.get_running_loop().create_task(
            self._prepare(prep, desktop, item.variant), name=f"spare-{desktop.handle.id}"
        )
        self._preparing.append(prep)

    async def _prepare(self, prep: _Prep, desktop: PreparedDesktop, variant: TaskVariant) -> None:
        try:
            with spans.span("spare_setup", desktop=desktop.handle.id, variant=variant.variant_id):
                await desktop.setup(variant)
        except BaseException as exc:
            self._preparing.remove(prep)
            if not prep.claimed:  # a claimed desktop is its actor's: it sets up itself
                desktop.discard_work()
                if not self.pool.closed:
                    self.pool.release(desktop.handle, not desktop_failed(exc))
            if isinstance(exc, asyncio.CancelledError):
                raise
            self.counts["spare_failed"] += 1
            log.warning(
                "spare desktop %s: setup of %s failed: %s",
                desktop.handle.id,
                variant.variant_id,
                exc,
            )
            self.kick()
            return
        self._preparing.remove(prep)
        self.counts["spare_prepared"] += 1
        if not prep.claimed:
            self._ready.append((prep.group_key, desktop))
        self.kick()
