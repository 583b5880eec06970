"""Where a finished task group goes: the selector first, then (only for training
data) the sample builder and the two learners.

Invariants (Algorithm 2, S u N): the groups of a task's versions (`original`) and
the group of a candidate accepted on it (`accepted`) train both learners; a
rejected candidate's group decides its acceptance and nothing else; an empty
group (every rollout given up) trains nothing and is not a sampled task. Both
learners get every training group, in the same order, the reward model's
samples possibly none (a task outside the band): so both count the same groups
into each RL step. Each group is routed exactly once, in the order groups
complete. Counters: `groups_original`, `groups_accepted`,
`candidate_groups_rejected`, `groups_empty`.

Success replay (`train.replay`, off by default) acts on training groups only, after
the selector has judged the group as sampled: a zero-success group may reach the
learners with one member replaced by a stored success (`runtime/success_replay.py`);
the metrics hook still gets the group as sampled, with the samples as trained.

Per-task budgets (`train.budgets`, off by default) observe training groups only, as
sampled, before replay: the task's next groups are sized and step-limited from them
(`runtime/task_budgets.py`).

Store upkeep (`store.*`): every group is recorded as routed once it went where it goes
(a training group's samples are built by then, a candidate's acceptance is judged),
and the first one after a policy update runs the WAL checkpoint and screenshot
retention (`store/upkeep.py`).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cua_rl.adapt.config import AdaptConfig
from cua_rl.adapt.selector import TRAINS, GroupUse, TemplateSelector
from cua_rl.config.train import TrainConfig
from cua_rl.learner.service import LearnerService
from cua_rl.reward.samples import GroupSamples, group_samples
from cua_rl.rollout.config import EpisodeConfig
from cua_rl.runtime.success_replay import ReplayedGroup, SuccessReplay
from cua_rl.runtime.task_budgets import TaskBudgets
from cua_rl.store.async_run_store import AsyncRunStore
from cua_rl.store.upkeep import StoreUpkeep
from cua_rl.types import GroupRecord

GroupMetricsHook = Callable[[GroupRecord, GroupSamples, int], None]
"""Called once per non-empty group with its samples (none for a rejected candidate's
group) and its number."""


class GroupRouter:
    def __init__(
        self,
        *,
        selector: TemplateSelector,
        store: AsyncRunStore,
        policy: LearnerService,
        prm: LearnerService | None,
        train: TrainConfig,
        adapt: AdaptConfig,
        episode: EpisodeConfig,
        selector_file: Path,
        on_metrics: GroupMetricsHook | None = None,
        replay: SuccessReplay | None = None,
        replay_file: Path | None = None,
        budgets: TaskBudgets | None = None,
        budgets_file: Path | None = None,
        upkeep: StoreUpkeep | None = None,
    ) -> None:
        self.selector, self.store = selector, store
        self.policy, self.prm = policy, prm
        self.train, self.adapt, self.episode = train, adapt, episode
        self.selector_file = selector_file
        self.on_metrics = on_metrics
        self.replay, self.replay_file = replay, replay_file
        self.budgets, self.budgets_file = budgets, budgets_file
        self.upkeep = upkeep
        self.groups = 0
        self._file_locks: dict[Path, asyncio.Lock] = {}

    async def __call__(self, group: GroupRecord) -> None:
        await self._route(group)
        if self.upkeep is not None:  # nothing reads its screenshots again: retention may count it
            await self.upkeep.routed(group.group_id, self.policy.version)

    async def _route(self, group: GroupRecord) -> None:
        use: GroupUse = "empty" if group.empty else "original"
        if self.adapt.enabled:
            use = await self.selector.on_group(group)
            await self._save(self.selector_file, self.selector.state_dict)
        if use == "empty":  # nothing was scored: no accuracy, no samples, no metrics
            await self.store.incr("groups_empty")
            return
        self.groups += 1
        if use not in TRAINS:  # a rejected candidate's group: its acceptance only
            await self.store.incr("candidate_groups_rejected")
            self._metrics(group, GroupSamples())
            return
        await self.store.incr(f"groups_{use}")
        await self._observe(group)
        trained = await self._replay(group)
        samples = await group_samples(
            trained.group,
            self.store,
            self.episode,
            reward=self.train.reward,
            band=self.train.prm_sample_band or self.adapt.band,
            keep_zero_advantage=self.train.keep_zero_advantage,
            replayed=trained.replayed_ids,
            prm_samples=self.prm is not None,
        )
        if trained.replaced is not None:  # every step accounted for
            samples.skipped["policy/replaced_by_replay"] += len(trained.replaced.steps)
            samples.skipped["prm/replaced_by_replay"] += sum(
                len(v.votes) for v in group.verdicts.get(trained.replaced.id, ())
            )
        self._metrics(group, samples)
        await self.policy.submit(samples.policy, group.group_id)
        if self.prm is not None:  # with or without samples: it counts into the same step
            await self.prm.submit(samples.prm, group.group_id)

    async def _replay(self, group: GroupRecord) -> ReplayedGroup:
        """The group as the learners train it (`train.replay`); the buffer's state
        is saved for `--resume` whenever replay is on."""
        if self.replay is None or not self.replay.cfg.enabled:
            return ReplayedGroup(group)
        trained = await self.replay.apply(group, self.policy.version)
        if self.replay_file is not None:
            await self._save(self.replay_file, self.replay.state_dict)
        return trained

    async def _observe(self, group: GroupRecord) -> None:
        """A training group, as sampled, into its task's budget window
        (`train.budgets`); the windows are saved for `--resume` whenever budgets are on."""
        if self.budgets is None or not self.budgets.cfg.enabled:
            return
        self.budgets.observe(group)
        if self.budgets_file is not None:
            await self._save(self.budgets_file, self.budgets.state_dict)

    async def _save(self, path: Path, state: Callable[[], dict[str, Any]]) -> None:
        """Write a state file for `--resume`, one write per file at a time, the state
        taken once the write may start: groups are routed concurrently, and two
        writers of one file once raced (one renamed the other's temporary file away,
        a 14-minute soak crashed) and could leave an older state last."""
        lock = self._file_locks.setdefault(path, asyncio.Lock())
        async with lock:
            await asyncio.get_running_loop().run_in_executor(None, _write_json, path, state())

    def _metrics(self, group: GroupRecord, samples: GroupSamples) -> None:
        if self.on_metrics is not None:
            self.on_metrics(group, samples, self.groups)


def _write_json(path: Path, data: dict[str, Any]) -> None:
    """Atomically: a crash mid-write leaves the previous state."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)
