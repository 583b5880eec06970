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
from cua_rl.learner.service import LearnerService
from cua_rl.reward.samples import GroupSamples, group_samples
from cua_rl.rollout.config import EpisodeConfig
from cua_rl.runtime.train_config import TrainConfig
from cua_rl.store.run_store import AsyncRunStore
from cua_rl.types import GroupRecord

GroupMetricsHook = Callable[[GroupRecord, GroupSamples, int], None]
"""Called once per non-empty group with its samples (none for a rejected candidate's
group) and its number."""


class GroupRouter:
    def __init__(self, *, selector: TemplateSelector, store: AsyncRunStore,
                 policy: LearnerService, prm: LearnerService | None, train: TrainConfig,
                 adapt: AdaptConfig, episode: EpisodeConfig, selector_file: Path,
                 on_metrics: GroupMetricsHook | None = None) -> None:
        self.selector, self.store = selector, store
        self.policy, self.prm = policy, prm
        self.train, self.adapt, self.episode = train, adapt, episode
        self.selector_file = selector_file
        self.on_metrics = on_metrics
        self.groups = 0

    async def __call__(self, group: GroupRecord) -> None:
        use: GroupUse = "empty" if group.empty else "original"
        if self.adapt.enabled:
            use = await self.selector.on_group(group)
            await asyncio.get_running_loop().run_in_executor(
                None, _write_json, self.selector_file, self.selector.state_dict())
        if use == "empty":  # nothing was scored: no accuracy, no samples, no metrics
            await self.store.incr("groups_empty")
            return
        self.groups += 1
        if use not in TRAINS:  # a rejected candidate's group: its acceptance only
            await self.store.incr("candidate_groups_rejected")
            self._metrics(group, GroupSamples())
            return
        await self.store.incr(f"groups_{use}")
        samples = await group_samples(
            group, self.store, self.episode, lam=self.train.lam,
            band=self.train.prm_sample_band or self.adapt.band,
            keep_zero_advantage=self.train.keep_zero_advantage)
        self._metrics(group, samples)
        await self.policy.submit(samples.policy, group.group_id)
        if self.prm is not None:  # with or without samples: it counts into the same step
            await self.prm.submit(samples.prm, group.group_id)

    def _metrics(self, group: GroupRecord, samples: GroupSamples) -> None:
        if self.on_metrics is not None:
            self.on_metrics(group, samples, self.groups)


def _write_json(path: Path, data: dict[str, Any]) -> None:
    """Atomically: a crash mid-write leaves the previous state."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)
