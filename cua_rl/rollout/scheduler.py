"""Task groups of G rollouts, handed out one ticket at a time with no batch barrier.

Invariants:
- every ticket handed out comes back exactly once, through `complete` or `abort`;
- an aborted rollout is re-queued at the front (same group, same slot, next
  attempt) and never counts as a failure;
- a group is emitted exactly once, when each of its G slots has completed or
  been given up (a group whose every rollout was given up is emitted empty, so
  a candidate task's group is always decided);
- a rollout starts only while the serving policy is fresh enough
  (`cua_rl.staleness_gate`, docs/architecture.md, concurrency).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from cua_rl.types import GroupRecord, StepVerdict, TaskVariant, Trajectory

TaskSource = Callable[[], Awaitable[TaskVariant | None]]
"""Yields the variant of the next task group; None when there is no more work."""


class Forecast(Protocol):
    """A task source that can tell what it would give next without giving it."""

    def upcoming(self, groups: int) -> list[TaskVariant]:
        """The variants of the next `groups` groups as things stand (a group that
        finishes meanwhile may change them); never changes what the source gives."""
        ...


class ForecastSource:
    """A `TaskSource` that is also a `Forecast`: `give` hands out, `peek` tells."""

    def __init__(self, give: TaskSource, peek: Callable[[int], list[TaskVariant]]) -> None:
        self.give = give
        self.peek = peek

    async def __call__(self) -> TaskVariant | None:
        return await self.give()

    def upcoming(self, groups: int) -> list[TaskVariant]:
        return self.peek(groups)


@dataclass(frozen=True, slots=True)
class Upcoming:
    """A rollout the scheduler will hand out soon (`GroupScheduler.upcoming`)."""

    variant: TaskVariant
    group_id: str | None
    """Its group's id when its ticket is queued; None for a forecast group's."""
    group_key: str
    """Names its group among the upcoming ones: the group id, or `next-K` for the
    K-th forecast group."""


@dataclass(frozen=True, slots=True)
class GroupBudget:
    """How many rollouts a new group of a variant gets, and their step limit."""

    size: int
    max_steps: int | None = None
    """None: no task limit (the horizon or `episode.max_steps` alone apply)."""

    def __post_init__(self) -> None:
        if self.size < 1:  # a group of no rollouts would never complete
            raise ValueError(f"a group budget needs at least 1 rollout, got {self.size}")


BudgetOf = Callable[[TaskVariant], GroupBudget]
"""Per-task budgets (`runtime/task_budgets.py`), asked once per group as it opens."""


@dataclass(frozen=True, slots=True)
class RolloutTicket:
    group_id: str
    variant: TaskVariant
    slot: int
    attempt: int = 0
    max_steps: int | None = None
    """The group's task step limit (`GroupBudget`), applied with the horizon by the
    fleet; it travels with the ticket, wherever the episode runs."""
    group_index: int = 0
    """Which group of the run this is, in the order groups opened (0, 1, ...): with
    the slot and the attempt it names the rollout for its seeds (`cua_rl/seeds.py`),
    unlike the group id, which may be random."""


@dataclass
class TaskGroup:
    """The G rollouts of one task variant (its budget's size with per-task budgets),
    scored together (advantages, accuracy)."""

    group_id: str
    variant: TaskVariant
    size: int
    trajectories: dict[int, Trajectory] = field(default_factory=dict)
    verdicts: dict[str, list[StepVerdict]] = field(default_factory=dict)
    """Reward-model verdicts per trajectory id, in step order."""
    gave_up: int = 0
    gave_up_reasons: list[str] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return len(self.trajectories) == self.size

    def record(self) -> GroupRecord:
        """The frozen record of this (completed) group."""
        trajectories = tuple(self.trajectories[slot] for slot in sorted(self.trajectories))
        return GroupRecord(
            self.group_id,
            self.variant,
            trajectories,
            {t.id: tuple(self.verdicts.get(t.id, ())) for t in trajectories},
            gave_up=self.gave_up,
            gave_up_reasons=tuple(self.gave_up_reasons),
        )


class GroupScheduler:
    """Hands out rollout tickets; collects finished rollouts into groups."""

    def __init__(
        self,
        source: TaskSource,
        group_size: int,
        *,
        max_groups: int | None = None,
        group_ids: Callable[[], str] | None = None,
        budget: BudgetOf | None = None,
    ) -> None:
        if group_size < 1:
            raise ValueError(f"group_size must be >= 1, got {group_size}")
        self.source = source
        self.group_size = group_size
        self.budget = budget
        """None: every group has `group_size` rollouts and no task step limit."""
        self.max_groups = max_groups
        counter = itertools.count()
        self._new_group_id = group_ids or (lambda: f"g{next(counter):06d}")
        self._pending: deque[RolloutTicket] = deque()
        self._groups: dict[str, TaskGroup] = {}
        self._started_groups = 0
        self._exhausted = False
        self._opening = False
        """A caller is asking the source for the next group (outside the lock)."""
        self._changed = asyncio.Condition()
        self.requeued = 0

    @property
    def open_groups(self) -> int:
        return len(self._groups)

    @property
    def queued(self) -> int:
        return len(self._pending)

    def upcoming(self, limit: int) -> list[Upcoming]:
        """Up to `limit` rollouts in the order their tickets will be handed out, as far
        as is known without asking the task source: the queued tickets, then, when the
        source is a `Forecast`, its next groups (`group_size` rollouts each). A read:
        the source is asked for its next group when an actor needs one, as without
        look-ahead, so Algorithm 2's decisions stay in order (spare desktops prepared
        for a forecast that changed are used later or prepared again)."""
        out = [
            Upcoming(t.variant, t.group_id, t.group_id)
            for t in itertools.islice(self._pending, limit)
        ]
        forecast = getattr(self.source, "upcoming", None)
        if len(out) >= limit or self._exhausted or forecast is None:
            return out
        groups = -(-(limit - len(out)) // self.group_size)
        if self.max_groups is not None:
            groups = min(groups, self.max_groups - self._started_groups)
        for k, variant in enumerate(forecast(groups) if groups > 0 else []):
            out += [Upcoming(variant, None, f"next-{k}")] * self.group_size
        return out[:limit]

    async def next_ticket(self) -> RolloutTicket | None:
        """The next rollout to run, or None once all work is done.

        While the source is exhausted but rollouts are still in flight, this
        waits: one of them may abort and come back as a re-queued ticket. The
        source is asked outside the lock, one caller at a time: it may wait long
        (a synchronous batch waits for its update and weight sync, under Ray it
        waits for the driver), and meanwhile rollouts must still complete.
        """
        while True:
            async with self._changed:
                if self._pending:
                    return self._pending.popleft()
                if self.drained:
                    return None
                if self._exhausted or self._opening:
                    await self._changed.wait()
                    continue
                self._opening = True
            try:
                variant = await self._admit()
            except BaseException:  # nothing opened: another caller asks again
                async with self._changed:
                    self._opening = False
                    self._changed.notify_all()
                raise
            async with self._changed:
                self._opening = False
                self._open(variant)
                self._changed.notify_all()

    async def _admit(self) -> TaskVariant | None:
        """The next group's variant from the source; None once there is no more work."""
        if self.max_groups is not None and self._started_groups >= self.max_groups:
            return None
        return await self.source()

    def _open(self, variant: TaskVariant | None) -> None:
        if variant is None:
            self._exhausted = True
            return
        budget = self.budget(variant) if self.budget else GroupBudget(self.group_size)
        group = TaskGroup(self._new_group_id(), variant, budget.size)
        self._groups[group.group_id] = group
        index = self._started_groups
        self._started_groups += 1
        self._pending.extend(
            RolloutTicket(
                group.group_id, variant, slot, max_steps=budget.max_steps, group_index=index
            )
            for slot in range(budget.size)
        )

    async def complete(
        self,
        ticket: RolloutTicket,
        trajectory: Trajectory,
        verdicts: list[StepVerdict] | None = None,
    ) -> GroupRecord | None:
        """Record a finished rollout (with its verdicts); return its group when that
        completes it. The group carries everything, wherever its rollouts ran."""
        async with self._changed:
            group = self._groups[ticket.group_id]
            if ticket.slot in group.trajectories:
                raise RuntimeError(f"slot {ticket.slot} of group {ticket.group_id} completed twice")
            group.trajectories[ticket.slot] = trajectory
            group.verdicts[trajectory.id] = list(verdicts or [])
            self._changed.notify_all()
            if group.done:
                del self._groups[ticket.group_id]
                return group.record()
            return None

    async def abort(self, ticket: RolloutTicket) -> None:
        """Re-queue an aborted rollout ahead of new work."""
        async with self._changed:
            self.requeued += 1
            self._pending.appendleft(dataclasses.replace(ticket, attempt=ticket.attempt + 1))
            self._changed.notify_all()

    async def give_up(self, ticket: RolloutTicket, reason: str = "") -> GroupRecord | None:
        """Drop a rollout that keeps aborting; its group shrinks by one and is
        returned if that completes it, empty when nothing of it was scored."""
        async with self._changed:
            group = self._groups[ticket.group_id]
            group.size -= 1
            group.gave_up += 1
            group.gave_up_reasons.append(reason)
            self._changed.notify_all()
            if group.done:
                del self._groups[ticket.group_id]
                return group.record()
            return None

    @property
    def drained(self) -> bool:
        """True once no ticket is pending, no group is open and no new one will be."""
        return self._exhausted and not self._pending and not self._groups
