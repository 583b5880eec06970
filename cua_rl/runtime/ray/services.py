"""The coordination services of a Ray run and the adapters workers talk to them
through, as plain classes (the Ray wrappers in `ray.actors` add nothing).

- `SchedulerService`: one `GroupScheduler` for the whole run. Its task source
  is a `VariantFeed` the driver answers (the selector stays on the driver), and
  it holds the outbox of finished groups the driver drains.
- `GateService`: one `VersionGate` the learner sets and every actor waits on.
- `RemoteScheduler`, `RemoteGate`: the async methods of the local classes over
  an actor handle (`await handle.method.remote(...)`), so `Fleet` runs unchanged.

Invariants: the feed asks the driver for a variant only when the scheduler
needs a new group, so no variant is drawn ahead of demand (as in a local run);
every finished group enters the outbox exactly once, and the driver sees the
end of the outbox only after every worker has returned.

A worker can be lost (its node died). The service knows which tickets each worker
holds and which finished groups it still owes the outbox, so `release_worker`
re-queues the lost worker's rollouts at the front of their groups (the slots that
completed stay completed) and puts the groups it owed into the outbox itself; from
then on that worker's calls are refused (a late `complete` or `put_group` that was
already on the wire changes nothing), so no slot completes twice and no group is
emitted twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cua_rl.rollout.scheduler import GroupBudget, GroupScheduler, RolloutTicket
from cua_rl.staleness_gate import VersionGate
from cua_rl.types import GroupRecord, StepVerdict, TaskVariant, Trajectory


@dataclass(frozen=True)
class WorkerRelease:
    """What the service did with a lost worker's share of the run."""

    worker_id: str
    requeued: list[tuple[str, int]] = field(default_factory=list)
    """(group id, slot) of each rollout the worker held, back at the front of the queue."""
    groups_delivered: list[str] = field(default_factory=list)
    """Groups it had completed but not yet handed to the outbox: the service did."""


@dataclass(frozen=True)
class GroupReport:
    """A finished group on its way to the driver, with the sending worker's
    running totals (for throughput and utilization metrics)."""

    worker_id: str
    group: GroupRecord
    counts: dict[str, float] = field(default_factory=dict)
    busy_s: float = 0.0
    lost_worker: bool = False
    """Delivered by the service for a lost worker: `counts` are not its totals."""


class VariantFeed:
    """A rendezvous between the scheduler (which needs the next variant) and the
    driver (which runs the selector and the per-task budgets): no queue, so nothing is
    drawn early. A variant may come with its group's budget (`train.budgets`), decided
    on the driver where the budgets observe finished groups; the scheduler takes it
    when it opens that group (`budget_of`), right after `request` returned it."""

    def __init__(self, group_size: int) -> None:
        self.group_size = group_size
        self._demand: asyncio.Queue[None] = asyncio.Queue(maxsize=1)
        self._supply: asyncio.Queue[tuple[TaskVariant | None, GroupBudget | None]] = asyncio.Queue(
            maxsize=1
        )
        self._budget: GroupBudget | None = None

    async def request(self) -> TaskVariant | None:
        """The scheduler's task source: ask the driver and wait for its answer."""
        await self._demand.put(None)
        variant, self._budget = await self._supply.get()
        return variant

    def budget_of(self, _variant: TaskVariant) -> GroupBudget:
        """The budget supplied with the variant `request` just returned (the global
        one when the driver sent none)."""
        return self._budget or GroupBudget(self.group_size)

    async def wait_demand(self) -> None:
        """Driver side: return once the scheduler asks for a variant."""
        await self._demand.get()

    async def supply(self, variant: TaskVariant | None, budget: GroupBudget | None = None) -> None:
        """Driver side: answer the pending request (None: no more work)."""
        await self._supply.put((variant, budget))


class SchedulerService:
    """The run's single `GroupScheduler`, fed by the driver, plus the outbox and
    who holds what (module doc: a lost worker's share is released, not lost).

    `owner` is the calling worker's id ('' for callers that are never released)."""

    def __init__(self, group_size: int, *, max_groups: int | None, backlog: int) -> None:
        self.feed = VariantFeed(group_size)
        self.scheduler = GroupScheduler(
            self.feed.request,
            group_size,
            max_groups=max_groups,
            group_ids=lambda: f"g-{uuid.uuid4().hex[:12]}",
            budget=self.feed.budget_of,
        )
        self._outbox: asyncio.Queue[GroupReport | None] = asyncio.Queue(maxsize=backlog)
        self._held: dict[str, dict[tuple[str, int], RolloutTicket]] = {}
        """owner -> the tickets it took and has not yet completed, aborted or given up."""
        self._owed: dict[str, dict[str, GroupRecord]] = {}
        """owner -> groups its completion emitted that have not reached the outbox."""
        self._lost: set[str] = set()
        self._deliveries: set[asyncio.Task[None]] = set()
        """Owed groups of released workers on their way into the (bounded) outbox."""

    # workers -------------------------------------------------------------------
    async def next_ticket(self, owner: str = "") -> RolloutTicket | None:
        if owner in self._lost:
            return None
        ticket = await self.scheduler.next_ticket()
        if ticket is not None and owner in self._lost:  # lost while it waited
            await self.scheduler.abort(ticket)
            return None
        if ticket is not None:
            self._held.setdefault(owner, {})[(ticket.group_id, ticket.slot)] = ticket
        return ticket

    def _returned(self, owner: str, ticket: RolloutTicket) -> bool:
        """Whether this ticket's return counts: not from a released worker."""
        if owner in self._lost:
            return False
        self._held.get(owner, {}).pop((ticket.group_id, ticket.slot), None)
        return True

    def _owe(self, owner: str, group: GroupRecord | None) -> GroupRecord | None:
        if group is not None:
            self._owed.setdefault(owner, {})[group.group_id] = group
        return group

    async def complete(
        self,
        ticket: RolloutTicket,
        trajectory: Trajectory,
        verdicts: list[StepVerdict] | None = None,
        owner: str = "",
    ) -> GroupRecord | None:
        if not self._returned(owner, ticket):
            return None
        return self._owe(owner, await self.scheduler.complete(ticket, trajectory, verdicts))

    async def abort(self, ticket: RolloutTicket, owner: str = "") -> None:
        if self._returned(owner, ticket):
            await self.scheduler.abort(ticket)

    async def give_up(
        self, ticket: RolloutTicket, reason: str = "", owner: str = ""
    ) -> GroupRecord | None:
        if not self._returned(owner, ticket):
            return None
        return self._owe(owner, await self.scheduler.give_up(ticket, reason))

    async def put_group(self, report: GroupReport) -> None:
        """Waits while `backlog` groups are queued for the driver."""
        owed = self._owed.get(report.worker_id, {})
        if report.worker_id in self._lost or report.group.group_id not in owed:
            return  # released: the service delivered it already
        del owed[report.group.group_id]
        await self._outbox.put(report)

    # driver --------------------------------------------------------------------
    async def release_worker(self, owner: str) -> WorkerRelease:
        """A worker is gone: re-queue the rollouts it held (each as its next attempt,
        ahead of new work) and deliver the groups it owed; refuse its calls from now."""
        self._lost.add(owner)
        held = self._held.pop(owner, {})
        for ticket in held.values():
            await self.scheduler.abort(ticket)
        owed = self._owed.pop(owner, {})
        for group in owed.values():  # in the background: a full outbox must not hold
            task = asyncio.create_task(  # the driver's call (it drains the outbox)
                self._outbox.put(GroupReport(owner, group, lost_worker=True))
            )
            self._deliveries.add(task)
            task.add_done_callback(self._deliveries.discard)
        return WorkerRelease(owner, sorted(held), sorted(owed))

    async def wait_demand(self) -> None:
        await self.feed.wait_demand()

    async def supply(self, variant: TaskVariant | None, budget: GroupBudget | None = None) -> None:
        await self.feed.supply(variant, budget)

    async def next_group(self) -> GroupReport | None:
        """The next finished group; None after `close_outbox` once it is empty."""
        return await self._outbox.get()

    async def close_outbox(self) -> None:
        """Every worker has returned: nothing more will be put (after the groups
        delivered for released workers)."""
        await asyncio.gather(*self._deliveries)
        await self._outbox.put(None)

    async def stats(self) -> dict[str, int]:
        return {
            "open_groups": self.scheduler.open_groups,
            "queued": self.scheduler.queued,
            "requeued": self.scheduler.requeued,
            "workers_released": len(self._lost),
        }


class GateService:
    """The run's single `VersionGate`; `wait_fresh` also returns the learner
    version so callers can mirror it without another round trip.

    It also holds the routing table of staggered weight sync: which replicas of each
    pool the driver has out of routing for their update (`set_withheld`), so the fleet
    workers' own pools can route around them too (`routing`, a bounded long poll)."""

    def __init__(self, eta: int) -> None:
        self.gate = VersionGate(eta)
        self._withheld: dict[str, list[str]] = {}
        self._routing_version = 0
        self._routing_changed = asyncio.Condition()

    async def set_withheld(self, pool: str, urls: list[str]) -> None:
        """The driver's pool `pool` has `urls` out of routing now (empty: none)."""
        if self._withheld.get(pool, []) == urls:
            return
        async with self._routing_changed:
            self._withheld[pool] = list(urls)
            self._routing_version += 1
            self._routing_changed.notify_all()

    async def routing(
        self, since: int, timeout_s: float = 30.0
    ) -> tuple[int, dict[str, list[str]]]:
        """The routing table once its version is past `since` (at most `timeout_s`
        later: then as it is), with its version."""
        async with self._routing_changed:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout_s):
                    await self._routing_changed.wait_for(lambda: self._routing_version > since)
            return self._routing_version, dict(self._withheld)

    async def wait_fresh(self) -> tuple[int, int]:
        serving = await self.gate.wait_fresh()
        return serving, self.gate.learner_version

    async def set_versions(self, *, learner: int | None = None, serving: int | None = None) -> None:
        await self.gate.set_versions(learner=learner, serving=serving)


class RemoteScheduler:
    """What `Fleet` needs of a `GroupScheduler`, served by a `SchedulerService`
    actor; `on_group` of a worker hands finished groups to `put_group`. Every
    call names the worker (`owner`), so the service can release its share."""

    def __init__(self, handle: Any, owner: str = "") -> None:
        self.handle = handle
        self.owner = owner

    async def next_ticket(self) -> RolloutTicket | None:
        return await self.handle.next_ticket.remote(self.owner)

    async def complete(
        self,
        ticket: RolloutTicket,
        trajectory: Trajectory,
        verdicts: list[StepVerdict] | None = None,
    ) -> GroupRecord | None:
        return await self.handle.complete.remote(ticket, trajectory, verdicts, self.owner)

    async def abort(self, ticket: RolloutTicket) -> None:
        await self.handle.abort.remote(ticket, self.owner)

    async def give_up(self, ticket: RolloutTicket, reason: str = "") -> GroupRecord | None:
        return await self.handle.give_up.remote(ticket, reason, self.owner)

    async def put_group(self, report: GroupReport) -> None:
        await self.handle.put_group.remote(report)


class RemoteGate:
    """A `VersionGate` in another process with the same async methods. It mirrors
    the versions it last saw, so synchronous readers (`fresh`, metrics) need no
    round trip; `on_versions(learner)` runs whenever a new learner version is seen
    (workers apply the horizon schedule with it)."""

    def __init__(
        self, handle: Any, eta: int, *, on_versions: Callable[[int], None] | None = None
    ) -> None:
        self.handle = handle
        self.eta = eta
        self.learner_version = 0
        self.serving_version = 0
        self.on_versions = on_versions

    def fresh(self, version: int) -> bool:
        return version >= self.learner_version - self.eta

    async def wait_fresh(self) -> int:
        serving, learner = await self.handle.wait_fresh.remote()
        self._seen(learner=learner, serving=serving)
        return serving

    async def set_versions(self, *, learner: int | None = None, serving: int | None = None) -> None:
        await self.handle.set_versions.remote(learner=learner, serving=serving)
        self._seen(learner=learner, serving=serving)

    def _seen(self, *, learner: int | None, serving: int | None) -> None:
        # versions only grow; replies that cross on the wire must not step back
        if serving is not None:
            self.serving_version = max(self.serving_version, serving)
        if learner is not None and learner > self.learner_version:
            self.learner_version = learner
            if self.on_versions is not None:
                self.on_versions(learner)
