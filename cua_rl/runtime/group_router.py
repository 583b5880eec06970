"""Where a finished task group goes: the selector first, then (only for training
data) the sample builder and the two learners.

Invariant (Algorithm 2): the group of a candidate task q' decides its acceptance
and nothing else; only groups of original and accepted tasks become learner
samples. Each group is routed exactly once, in the order groups complete.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cua_rl.adapt.config import AdaptConfig
from cua_rl.adapt.selector import TemplateSelector
from cua_rl.learner.service import LearnerService
from cua_rl.reward.samples import GroupSamples, group_samples
from cua_rl.rollout.config import EpisodeConfig
from cua_rl.runtime.train_config import TrainConfig
from cua_rl.store.run_store import AsyncRunStore
from cua_rl.types import GroupRecord

GroupMetricsHook = Callable[[GroupRecord, GroupSamples, int], None]
"""Called once per group with its samples (empty for a candidate's group) and its number."""


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
        self.groups += 1
        trainable = True
        if self.adapt.enabled:
            trainable = await self.selector.on_group(group)
            await asyncio.get_running_loop().run_in_executor(
                None, _write_json, self.selector_file, self.selector.state_dict())
        if not trainable:  # a candidate's group: used for its acceptance only
            await self.store.incr("candidate_groups")
            self._metrics(group, GroupSamples())
            return
        samples = await group_samples(
            group, self.store, self.episode, lam=self.train.lam,
            band=self.train.prm_sample_band or self.adapt.band,
            keep_zero_advantage=self.train.keep_zero_advantage)
        self._metrics(group, samples)
        await self.policy.submit(samples.policy, group.group_id)
        if self.prm is not None:
            await self.prm.submit(samples.prm, group.group_id)

    def _metrics(self, group: GroupRecord, samples: GroupSamples) -> None:
        if self.on_metrics is not None:
            self.on_metrics(group, samples, self.groups)


def _write_json(path: Path, data: dict[str, Any]) -> None:
    """Atomically: a crash mid-write leaves the previous state."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)
