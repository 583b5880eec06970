"""The actor fleet: many episodes as asyncio tasks in one process, no batch barrier.

Each actor loops: take a ticket, wait for a fresh-enough policy, lease a desktop,
run the episode, hand the desktop back, and take the next ticket at once. The
trajectory is finished in the background (its reward-model verdicts collected,
its group completed) so a desktop never waits for the judge.

Invariants: every ticket ends in exactly one of complete / abort (re-queued) /
give_up; every give-up and every set-aside variant is recorded in the store with
its reason; a desktop whose episode aborted goes back unhealthy and is replaced by
its pool; a group is emitted once, with the verdicts of all its trajectories.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from cua_rl import spans
from cua_rl.errors import EpisodeAborted
from cua_rl.inference.base import ChatBackend
from cua_rl.reward.judge import StreamingJudge
from cua_rl.rollout.actor import run_episode
from cua_rl.rollout.base import EpisodeDesktop
from cua_rl.rollout.config import EpisodeConfig, FleetConfig, HorizonSchedule
from cua_rl.rollout.scheduler import GroupScheduler, RolloutTicket
from cua_rl.seeds import derive_seed
from cua_rl.staleness_gate import Gate, VersionGate
from cua_rl.store.async_run_store import AsyncRunStore
from cua_rl.store.run_events import GAVE_UP, SET_ASIDE
from cua_rl.types import GroupRecord, Trajectory


class DesktopSource(Protocol):
    """Leases desktops; an exception escaping the lease marks the desktop dead. The
    ticket says which rollout the desktop is for (a source that prepares desktops
    ahead hands out one set up for it). A source may also offer `ahead(scheduler)`
    (an async context the fleet runs in: look-ahead for spare desktops) and
    `group_done(group_id)` (a group was emitted: its fork point can go)."""

    def lease(
        self, ticket: RolloutTicket | None = None
    ) -> AbstractAsyncContextManager[EpisodeDesktop]: ...


GroupHandler = Callable[[GroupRecord], Awaitable[None]]
"""Receives each completed task group once."""


class Fleet:
    """Runs `actors` (default `cfg.actors`) concurrent episodes until the scheduler is
    drained; a Ray fleet worker runs its share of the run's actors."""

    def __init__(
        self,
        scheduler: GroupScheduler,
        desktops: DesktopSource,
        policy: ChatBackend,
        store: AsyncRunStore,
        episode: EpisodeConfig,
        cfg: FleetConfig,
        *,
        judge: StreamingJudge | None = None,
        gate: Gate | None = None,
        on_group: GroupHandler | None = None,
        horizon: HorizonSchedule | None = None,
        actors: int | None = None,
        seed: int | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.actors = cfg.actors if actors is None else actors
        self.desktops = desktops
        self.policy = policy
        self.store = store
        self.episode = episode
        self.cfg = cfg
        self.judge = judge
        self.gate = gate or VersionGate(cfg.eta)
        self.on_group = on_group
        self.horizon = horizon
        """Step-limit schedule applied to each episode from the learner version at its
        start (the one place it is applied, local or under Ray); a ticket's task step
        limit (`train.budgets`) lowers it further."""
        self.seed = seed
        """The run's seed: each rollout's requests are seeded from it, its ticket's group
        index, slot and attempt (None: unseeded)."""
        self.counts: Counter[str] = Counter()
        self.busy_s = 0.0
        self.aborts_in_a_row: Counter[str] = Counter()
        """Per variant id: aborts since the last rollout of it that completed."""
        self.set_aside: dict[str, str] = {}
        """Poisoned variants (see `FleetConfig.set_aside_after`) -> reason."""
        """Desktop-seconds spent inside episodes (for utilization)."""

    async def run(self) -> Counter[str]:
        started = time.perf_counter()
        spans.mark("fleet", actors=self.actors)
        ahead = getattr(self.desktops, "ahead", None)
        async with ahead(self.scheduler) if ahead is not None else contextlib.nullcontext():
            async with asyncio.TaskGroup() as finishing:
                async with asyncio.TaskGroup() as actors:
                    for k in range(self.actors):
                        actors.create_task(self._actor(finishing, k), name=f"actor-{k}")
        self.counts["wall_s"] = time.perf_counter() - started
        return self.counts

    async def _actor(self, finishing: asyncio.TaskGroup, actor: int = 0) -> None:
        while True:
            with spans.span("ticket_wait", actor=actor):
                ticket = await self.scheduler.next_ticket()
            if ticket is None:
                return
            if ticket.variant.variant_id in self.set_aside:
                reason = f"variant set aside: {self.set_aside[ticket.variant.variant_id]}"
                await self._give_up(ticket, finishing, reason)
                continue
            with spans.span("gate_wait", actor=actor):
                version = await self.gate.wait_fresh()
            tid = uuid.uuid4().hex
            t0 = time.perf_counter()
            leasing = spans.span("lease_wait", actor=actor, tid=tid).begin()
            try:
                async with self.desktops.lease(ticket) as desktop:
                    leasing.end()
                    with spans.span(
                        "episode", actor=actor, tid=tid, group=ticket.group_id, version=version
                    ) as episode:
                        traj = await run_episode(
                            ticket.variant,
                            desktop,
                            self.policy,
                            self.store,
                            self._episode(ticket.max_steps),
                            judge=self.judge,
                            trajectory_id=tid,
                            group_id=ticket.group_id,
                            policy_version=version,
                            seed=derive_seed(
                                self.seed,
                                "rollout",
                                ticket.group_index,
                                ticket.slot,
                                ticket.attempt,
                            ),
                        )
                        episode.set(steps=len(traj.steps))
            except EpisodeAborted as exc:
                self.busy_s += time.perf_counter() - t0
                await self._aborted(ticket, tid, finishing, str(exc), permanent=exc.permanent)
                continue
            self.busy_s += time.perf_counter() - t0
            finishing.create_task(self._finish(ticket, traj), name=f"finish-{tid}")

    def _episode(self, task_steps: int | None = None) -> EpisodeConfig:
        """The episode's settings; its step limit is the horizon's at the learner's
        version (else `episode.max_steps`), lowered to the ticket's task budget."""
        steps = (
            self.horizon.max_steps(self.gate.learner_version)
            if self.horizon is not None
            else self.episode.max_steps
        )
        if task_steps is not None:
            steps = min(steps, task_steps)
        if steps == self.episode.max_steps:
            return self.episode
        return self.episode.model_copy(update={"max_steps": steps})

    async def _aborted(
        self,
        ticket: RolloutTicket,
        tid: str,
        finishing: asyncio.TaskGroup,
        reason: str,
        *,
        permanent: bool = False,
    ) -> None:
        self.counts["aborted"] += 1
        await self.store.incr("aborted_attempts")
        if self.judge is not None:
            self.judge.discard(tid)
        variant_id = ticket.variant.variant_id
        self.aborts_in_a_row[variant_id] += 1
        limit = self.cfg.set_aside_after
        if (
            limit is not None
            and self.aborts_in_a_row[variant_id] >= limit
            and variant_id not in self.set_aside
        ):
            self.set_aside[variant_id] = reason
            self.counts["set_aside"] += 1
            await self.store.add_event(
                SET_ASIDE,
                variant_id,
                {"reason": reason, "aborts_in_a_row": self.aborts_in_a_row[variant_id]},
            )
        if (
            not permanent
            and variant_id not in self.set_aside
            and ticket.attempt + 1 < self.cfg.max_attempts
        ):
            self.counts["requeued"] += 1
            await self.scheduler.abort(ticket)
            return
        await self._give_up(ticket, finishing, reason)

    async def _give_up(
        self, ticket: RolloutTicket, finishing: asyncio.TaskGroup, reason: str
    ) -> None:
        """Drop a rollout for good, recording why (its group shrinks by one)."""
        self.counts["gave_up"] += 1
        await self.store.add_event(
            GAVE_UP,
            ticket.variant.variant_id,
            {
                "group_id": ticket.group_id,
                "slot": ticket.slot,
                "attempts": ticket.attempt + 1,
                "reason": reason,
            },
        )
        group = await self.scheduler.give_up(ticket, reason)
        if group is not None:
            finishing.create_task(self._emit(group))

    async def _finish(self, ticket: RolloutTicket, traj: Trajectory) -> None:
        with spans.span("judge_wait", tid=traj.id):
            verdicts = await self.judge.collect(traj.id) if self.judge is not None else []
        self.aborts_in_a_row.pop(traj.variant_id, None)
        parse_errors = sum(1 for s in traj.steps if s.parse_error)
        self.counts["episodes"] += 1
        self.counts["steps"] += len(traj.steps)
        self.counts["parse_errors"] += parse_errors
        self.counts["successes"] += traj.outcome == 1
        if parse_errors:
            await self.store.incr("parse_errors", parse_errors)
        group = await self.scheduler.complete(ticket, traj, verdicts)
        if group is not None:
            await self._emit(group)

    async def _emit(self, group: GroupRecord) -> None:
        self.counts["groups_empty" if group.empty else "groups"] += 1
        group_done = getattr(self.desktops, "group_done", None)
        if group_done is not None:
            group_done(group.group_id)
        if self.on_group is not None:
            await self.on_group(group)
