"""`train.mode: sync`: the synchronous baseline of the same loop (GRPO-style).

A batch is the task groups of one RL step (`train.tasks_per_update`). Its
rollouts run at once on the fleet's desktops, their steps are judged as they
come, and the next batch starts only after every group of this one has been
routed and both learners have trained on it and synced their weights. The
fleet, desktops, pools, learners and selector are the asynchronous mode's own:
only the task source waits, so the two modes differ in orchestration alone
(`cua-rl bench loop` times them side by side).

The barrier counts what the learners count. A group that trains nothing (every
rollout given up, or a rejected Algorithm 2 candidate) leaves its place in the
step empty, so the next batch is only as large as the step still needs; a step
whose groups carry no sample is still a step (`<role>_steps_empty`) and settles
the batch like an update does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from cua_rl.learner.service import LearnerService
from cua_rl.rollout.fleet import GroupHandler
from cua_rl.rollout.scheduler import TaskSource
from cua_rl.types import GroupRecord, TaskVariant


class SyncBatches:
    """The task source of a synchronous run, and the hook that sees its groups end.

    `learners`: the policy learner first (its submitted groups define the steps),
    then the reward model's, which trains the same groups step for step.
    """

    def __init__(
        self, source: TaskSource, learners: Sequence[LearnerService], tasks_per_update: int
    ) -> None:
        if not learners:
            raise ValueError("a synchronous run needs the policy learner")
        self.source = source
        self.learners = list(learners)
        self.tasks_per_update = tasks_per_update
        self.handed = 0
        """Groups this source has opened."""
        self.routed = 0
        """Groups that have been through the loop's group handler."""
        self.batches = 0
        self._left = 0
        """Groups the current batch may still open."""
        self._opened = 0
        self._changed = asyncio.Condition()

    async def __call__(self) -> TaskVariant | None:
        if self._left == 0:
            if not await self._settle():
                return None
            pending = self.learners[0].groups_submitted % self.tasks_per_update
            self._left = self.tasks_per_update - pending
            self._opened = 0
        variant = await self.source()
        if variant is not None:
            self.batches += self._opened == 0
            self._opened += 1
            self._left -= 1
            self.handed += 1
        return variant

    async def _settle(self) -> bool:
        """Wait until the last batch is routed, trained and synced; False once a
        learner stopped (the run reached its update budget)."""
        async with self._changed:
            await self._changed.wait_for(lambda: self.routed >= self.handed)
        step = self.learners[0].groups_submitted // self.tasks_per_update
        for learner in self.learners:  # outside the lock: groups keep being routed
            if not await learner.settled(step):
                return False
        return True

    def wrap(self, on_group: GroupHandler) -> GroupHandler:
        """`on_group`, counting each group once it has been handled."""

        async def handled(group: GroupRecord) -> None:
            try:
                await on_group(group)
            finally:
                async with self._changed:
                    self.routed += 1
                    self._changed.notify_all()

        return handled
