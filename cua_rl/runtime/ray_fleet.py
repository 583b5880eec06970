"""The fleet of a Ray run as the driver's training loop sees it.

`WorkerFleet` has the face of a local `Fleet` (`run`, `counts`, `busy_s`) but
its actors live in fleet workers: it answers the scheduler service's requests
for variants from the loop's task source, drains finished groups into the
loop's `on_group`, and returns once every worker has returned. Handles are Ray
actor handles or anything whose `handle.method.remote(...)` is awaitable.

Invariant: `on_group` sees every finished group exactly once, and `run`
returns only after the last one has been handled.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from cua_rl.rollout.fleet import GroupHandler
from cua_rl.rollout.scheduler import TaskSource
from cua_rl.runtime.ray_services import GroupReport
from cua_rl.runtime.ray_workers import WorkerReport


class WorkerFleet:
    """Runs the fleet workers against the scheduler service (see module doc)."""

    def __init__(self, scheduler: Any, workers: list[Any], source: TaskSource,
                 on_group: GroupHandler) -> None:
        self.scheduler = scheduler
        self.workers = workers
        self.source = source
        self.on_group = on_group
        self.counts: Counter[str] = Counter()
        self.busy_s = 0.0
        self.reports: list[WorkerReport] = []
        self._latest: dict[str, tuple[dict[str, float], float]] = {}

    async def run(self) -> Counter[str]:
        async with asyncio.TaskGroup() as tasks:
            feeding = tasks.create_task(self._feed(), name="variant-feed")
            draining = tasks.create_task(self._drain(), name="group-drain")
            reports = await asyncio.gather(*(w.run.remote() for w in self.workers))
            await self.scheduler.close_outbox.remote()
            await draining
            feeding.cancel()  # a scheduler capped by max_groups never asks again
        self.reports = list(reports)
        for report in self.reports:
            self._update(report.worker_id, report.counts, report.busy_s)
        return self.counts

    async def _feed(self) -> None:
        while True:
            await self.scheduler.wait_demand.remote()
            variant = await self.source()
            await self.scheduler.supply.remote(variant)
            if variant is None:
                return

    async def _drain(self) -> None:
        while (report := await self.scheduler.next_group.remote()) is not None:
            assert isinstance(report, GroupReport)
            self._update(report.worker_id, report.counts, report.busy_s)
            await self.on_group(report.group)

    def _update(self, worker_id: str, counts: dict[str, float], busy_s: float) -> None:
        """Totals over workers from each worker's latest running totals."""
        self._latest[worker_id] = (counts, busy_s)
        total: Counter[str] = Counter()
        for worker_counts, _ in self._latest.values():
            total.update(worker_counts)
        self.counts = total
        self.busy_s = sum(busy for _, busy in self._latest.values())

    def episodes_per_worker(self) -> dict[str, int]:
        return {wid: int(counts.get("episodes", 0)) for wid, (counts, _) in
                sorted(self._latest.items())}
