"""The fleet of a Ray run as the driver's training loop sees it.

`WorkerFleet` has the face of a local `Fleet` (`run`, `counts`, `busy_s`) but
its actors live in fleet workers: it answers the scheduler service's requests
for variants from the loop's task source, drains finished groups into the
loop's `on_group`, and returns once every worker has returned. Handles are Ray
actor handles or anything whose `handle.method.remote(...)` is awaitable.

A worker whose `run` fails with a lost-worker error (`RayActorError`: its node
died, its process was killed) is lost, not fatal: its desktops and running
episodes are gone; the scheduler service re-queues the rollouts it held (the
slots of their groups that completed stay completed) and delivers the finished
groups it still owed (`SchedulerService.release_worker`); the run goes on with
the workers left, and a replacement worker is started in the lost worker's
placement bundle (`spawn`), which Ray places once a node with room is there
again (a bundle on a dead node is rescheduled by Ray). A replacement that dies
before it starts (Ray placed it in the bundle while still booking it on the dead
node) is started again, not counted as lost. While no worker is running, a
replacement must be placed within `replace_timeout_s`, else the run fails with
`FleetLost`. Any other error of a worker is a bug and propagates.

Invariant: `on_group` sees every finished group exactly once (a lost worker's
late calls are refused by the service), and `run` returns only after the last
one has been handled.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from cua_rl.errors import FleetLost
from cua_rl.rollout.fleet import GroupHandler
from cua_rl.rollout.scheduler import BudgetOf, TaskSource
from cua_rl.runtime.ray.services import GroupReport, WorkerRelease
from cua_rl.runtime.ray.workers import WorkerReport

log = logging.getLogger(__name__)

RESPAWN_DELAY_S = 1.0
PLACE_ATTEMPTS = 60
"""A replacement that keeps dying before it starts is given up (with the run) after
this many tries (a minute or more, with RESPAWN_DELAY_S between tries)."""

FleetEvent = Callable[[str, dict[str, Any]], Awaitable[None]]
"""Told of `worker_lost`, `worker_replaced` and, for each group a lost worker held a
rollout of, `group_after_worker_lost` with the trajectories it was routed with (the
driver stores them as events)."""


@dataclass
class WorkerSupervision:
    """How the driver replaces lost workers (from `RayConfig`)."""

    spawn: Callable[[int, str], Any] | None = None
    """(bundle index, worker id) -> a new worker's handle; None: never replace."""
    kill: Callable[[Any], None] = lambda handle: None
    """Makes sure a lost worker's actor is gone (`ray.kill`)."""
    max_replacements: int = 8
    replace_timeout_s: float = 600.0
    call_timeout_s: float = 120.0
    """Deadline of the driver's calls to the scheduler service about a lost worker."""
    lost_errors: tuple[type[BaseException], ...] | None = None
    """Errors of a worker's `run` that mean it is lost; None: Ray's `RayActorError`."""
    on_event: FleetEvent | None = None


@dataclass
class _Slot:
    index: int
    worker_id: str
    handle: Any
    running: bool
    """False while a replacement waits to be placed (its `ready` call)."""
    attempts: int = 0
    """Times this replacement died before it was placed (`_respawn`)."""


async def _call(ref: Any) -> Any:
    return await ref


class WorkerFleet:
    """Runs the fleet workers against the scheduler service (see module doc)."""

    def __init__(
        self,
        scheduler: Any,
        workers: list[Any],
        source: TaskSource,
        on_group: GroupHandler,
        supervision: WorkerSupervision | None = None,
        budget: BudgetOf | None = None,
    ) -> None:
        """`budget`: per-task budgets (`train.budgets`), decided here on the driver and
        sent with each variant to the scheduler service, which opens the group with it."""
        self.scheduler = scheduler
        self.budget = budget
        self.workers = workers
        self.source = source
        self.on_group = on_group
        self.supervision = supervision or WorkerSupervision()
        self.counts: Counter[str] = Counter()
        self.busy_s = 0.0
        self.reports: list[WorkerReport] = []
        self.lost: list[WorkerRelease] = []
        self.replaced: list[str] = []
        self._latest: dict[str, tuple[dict[str, float], float]] = {}
        self._requeued_groups: set[str] = set()
        """Groups a lost worker held a rollout of: stored as routed (`_drain`)."""
        self._drained = False
        """A worker returned: the scheduler has no more work, none will come back."""

    async def run(self) -> Counter[str]:
        async with asyncio.TaskGroup() as tasks:
            feeding = tasks.create_task(self._feed(), name="variant-feed")
            draining = tasks.create_task(self._drain(), name="group-drain")
            await self._supervise()
            await self.scheduler.close_outbox.remote()
            await draining
            feeding.cancel()  # a scheduler capped by max_groups never asks again
        for report in self.reports:
            self._update(report.worker_id, report.counts, report.busy_s)
        return self.counts

    async def _supervise(self) -> None:
        """Run every worker until all have returned, replacing lost ones."""
        tasks: dict[asyncio.Task[Any], _Slot] = {}
        for i, handle in enumerate(self.workers):
            slot = _Slot(i, f"w{i}", handle, running=True)
            tasks[asyncio.ensure_future(_call(handle.run.remote()))] = slot
        loop = asyncio.get_running_loop()
        deadline: float | None = None
        try:
            while tasks:
                if self._drained:
                    self._drop_unplaced(tasks)
                    if not tasks:
                        break
                if any(slot.running for slot in tasks.values()):
                    deadline = None
                else:
                    deadline = deadline or loop.time() + self.supervision.replace_timeout_s
                timeout = None if deadline is None else max(0.0, deadline - loop.time())
                done, _ = await asyncio.wait(
                    tasks, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
                )
                if not done:
                    raise FleetLost(
                        f"ray: no fleet worker is running and no replacement was placed "
                        f"within {self.supervision.replace_timeout_s:.0f} s (a node with the "
                        "fleet workers' resources must join; see `ray status`, "
                        "ray.replace_timeout_s)"
                    )
                for task in done:
                    await self._settle(task, tasks.pop(task), tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _settle(
        self, task: asyncio.Task[Any], slot: _Slot, tasks: dict[asyncio.Task[Any], _Slot]
    ) -> None:
        error = task.exception()
        if not slot.running:
            if error is None:  # a replacement was placed: run it
                await self._replaced(slot, tasks)
            elif isinstance(error, self._lost_errors()):
                self._respawn(slot, tasks)
            else:
                raise error
        elif error is None:
            self.reports.append(task.result())
            self._drained = True
        elif isinstance(error, self._lost_errors()):
            await self._lose(slot, error)
            if (
                self.supervision.spawn is not None
                and not self._drained
                and len(self.lost) <= self.supervision.max_replacements
            ):
                worker_id = f"w{slot.index}.{len(self.lost)}"
                handle = self.supervision.spawn(slot.index, worker_id)
                tasks[asyncio.ensure_future(_call(handle.ready.remote()))] = _Slot(
                    slot.index, worker_id, handle, running=False
                )
        else:
            raise error

    async def _replaced(self, slot: _Slot, tasks: dict[asyncio.Task[Any], _Slot]) -> None:
        self.replaced.append(slot.worker_id)
        log.warning(
            "fleet worker %s replaced (bundle %d): %d replacement(s) so far",
            slot.worker_id,
            slot.index,
            len(self.replaced),
        )
        self._update_totals()
        await self._event("worker_replaced", {"worker": slot.worker_id, "bundle": slot.index})
        slot.running = True
        tasks[asyncio.ensure_future(_call(slot.handle.run.remote()))] = slot

    def _respawn(self, slot: _Slot, tasks: dict[asyncio.Task[Any], _Slot]) -> None:
        """A replacement died before it ran: Ray had not yet declared the lost node
        dead and placed it in the bundle still booked there. Not a lost worker (it held
        nothing); start it again a moment later, at most `PLACE_ATTEMPTS` times."""
        assert self.supervision.spawn is not None
        self.supervision.kill(slot.handle)
        slot.attempts += 1
        if slot.attempts >= PLACE_ATTEMPTS:
            raise FleetLost(
                f"ray: replacement fleet worker {slot.worker_id} died "
                f"{slot.attempts} times before it started (bundle {slot.index})"
            )
        log.info(
            "replacement fleet worker %s died before it started (bundle %d still "
            "booked on a dead node); starting it again (try %d)",
            slot.worker_id,
            slot.index,
            slot.attempts + 1,
        )
        slot.handle = self.supervision.spawn(slot.index, slot.worker_id)

        async def place_later(handle: Any) -> Any:
            await asyncio.sleep(RESPAWN_DELAY_S)
            return await handle.ready.remote()

        tasks[asyncio.ensure_future(place_later(slot.handle))] = slot

    async def _lose(self, slot: _Slot, error: BaseException) -> None:
        """Release the lost worker's share of the run and say so once."""
        self.supervision.kill(slot.handle)
        release = await asyncio.wait_for(
            self.scheduler.release_worker.remote(slot.worker_id), self.supervision.call_timeout_s
        )
        assert isinstance(release, WorkerRelease)
        self.lost.append(release)
        self._requeued_groups.update(group_id for group_id, _ in release.requeued)
        self._update_totals()
        log.warning(
            "fleet worker %s lost (%s): %d rollout(s) re-queued, %d finished "
            "group(s) delivered for it; %s",
            slot.worker_id,
            type(error).__name__,
            len(release.requeued),
            len(release.groups_delivered),
            "no replacement (the run has no more work)"
            if self._drained
            else "a replacement waits for a node with room",
        )
        await self._event(
            "worker_lost",
            {
                "worker": slot.worker_id,
                "bundle": slot.index,
                "error": type(error).__name__,
                "requeued": [list(r) for r in release.requeued],
                "groups_delivered": release.groups_delivered,
            },
        )

    def _drop_unplaced(self, tasks: dict[asyncio.Task[Any], _Slot]) -> None:
        """No more work: replacements still waiting for a node are not needed."""
        for task, slot in list(tasks.items()):
            if not slot.running:
                task.cancel()
                self.supervision.kill(slot.handle)
                del tasks[task]

    def _lost_errors(self) -> tuple[type[BaseException], ...]:
        if self.supervision.lost_errors is None:
            from ray.exceptions import RayActorError

            self.supervision.lost_errors = (RayActorError,)
        return self.supervision.lost_errors

    async def _event(self, kind: str, data: dict[str, Any]) -> None:
        if self.supervision.on_event is not None:
            await self.supervision.on_event(kind, data)

    async def _feed(self) -> None:
        while True:
            await self.scheduler.wait_demand.remote()
            variant = await self.source()
            budget = self.budget(variant) if self.budget and variant is not None else None
            await self.scheduler.supply.remote(variant, budget)
            if variant is None:
                return

    async def _drain(self) -> None:
        while (report := await self.scheduler.next_group.remote()) is not None:
            assert isinstance(report, GroupReport)
            if not report.lost_worker:  # a lost worker's totals stay as last reported
                self._update(report.worker_id, report.counts, report.busy_s)
            await self.on_group(report.group)
            if report.group.group_id in self._requeued_groups:
                # which stored trajectories made the group: any other of its rows was
                # an episode of the lost worker, re-run elsewhere (soak/ledger.py)
                self._requeued_groups.discard(report.group.group_id)
                await self._event(
                    "group_after_worker_lost",
                    {
                        "worker": report.worker_id,
                        "group_id": report.group.group_id,
                        "trajectories": [t.id for t in report.group.trajectories],
                    },
                )

    def _update(self, worker_id: str, counts: dict[str, float], busy_s: float) -> None:
        """Totals over workers from each worker's latest running totals."""
        self._latest[worker_id] = (counts, busy_s)
        self._update_totals()

    def _update_totals(self) -> None:
        total: Counter[str] = Counter()
        for worker_counts, _ in self._latest.values():
            total.update(worker_counts)
        total["workers_lost"] = len(self.lost)
        total["workers_replaced"] = len(self.replaced)
        self.counts = total
        self.busy_s = sum(busy for _, busy in self._latest.values())

    def episodes_per_worker(self) -> dict[str, int]:
        return {
            wid: int(counts.get("episodes", 0)) for wid, (counts, _) in sorted(self._latest.items())
        }
