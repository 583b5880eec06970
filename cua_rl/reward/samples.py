"""From a finished task group to learner samples for the policy and the PRM.

Turning a group into samples is reward logic (docs/algorithms.md):
integrated step rewards (Eq. 1 for the policy, Eq. 2 for the reward model, each
with its own lambda, `RewardConfig`), policy advantages per step index across the
group, reward-model advantages across the m votes, reward-model samples only from
tasks in the band and only while the reward model trains. The learners consume
the resulting `StepSample`s and nothing else.

Prompts are rebuilt from the run store with the same functions the actor and the
judge used (`step_messages`, `prm_messages`, `encode_image` on the stored
screenshot bytes), so a sample's prompt is identical to what the behavior model
saw and its behavior logprobs stay valid.

Every step of the group is accounted for: it becomes a sample, or it is counted
under the reason it did not (`GroupSamples.skipped`), so nothing is lost silently.
A screenshot file that is gone (`missing_screenshot`: screenshot retention deleted a
file an episode still running had taken before, store/retention.py) costs that step,
not the group.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from typing import Protocol

from cua_rl.agent import prm_messages
from cua_rl.agent.context import ContextSettings, history_line, step_messages
from cua_rl.agent.images import encode_image
from cua_rl.reward.advantages import (
    EPS,
    policy_advantages,
    prm_task_eligible,
    prm_vote_advantages,
    step_rewards,
)
from cua_rl.reward.config import RewardConfig
from cua_rl.store.async_run_store import AsyncRunStore
from cua_rl.types import GroupRecord, StepSample, StepVerdict, Trajectory


class AccuracyBand(Protocol):
    """The group-accuracy band whose tasks give reward-model samples (adapt's
    `AdaptBand` and `train.prm_sample_band` have this shape): a protocol, so the reward
    package needs nothing of adapt."""

    alpha_low: float
    alpha_high: float


@dataclass
class GroupSamples:
    policy: list[StepSample] = field(default_factory=list)
    prm: list[StepSample] = field(default_factory=list)
    rewards: dict[str, list[float]] = field(default_factory=dict)
    """The policy's integrated step rewards R_i (Eq. 1) per trajectory (for metrics)."""
    skipped: Counter[str] = field(default_factory=Counter)
    """Steps (`policy/<reason>`) and votes (`prm/<reason>`) that did not become samples."""


class _Screens:
    """Data URLs of stored screenshots, encoded once per group off the loop."""

    def __init__(self, store: AsyncRunStore, cfg: ContextSettings) -> None:
        self.store, self.cfg = store, cfg
        self._urls: dict[str, str] = {}

    async def url(self, name: str) -> str:
        if name not in self._urls:
            path = self.store.screenshot_path(name)
            loop = asyncio.get_running_loop()
            data = await loop.run_in_executor(None, path.read_bytes)
            self._urls[name] = await loop.run_in_executor(
                None,
                partial(
                    encode_image,
                    data,
                    min_pixels=self.cfg.min_pixels,
                    max_pixels=self.cfg.max_pixels,
                ),
            )
        return self._urls[name]


def _votes_by_step(traj: Trajectory, verdicts: tuple[StepVerdict, ...]) -> list[list[int]]:
    by_index = {v.step_index: [vote.score for vote in v.votes] for v in verdicts}
    return [by_index.get(s.index, []) for s in traj.steps]


async def group_samples(
    group: GroupRecord,
    store: AsyncRunStore,
    episode: ContextSettings,
    *,
    reward: RewardConfig | None = None,
    band: AccuracyBand,
    keep_zero_advantage: bool = False,
    replayed: frozenset[str] = frozenset(),
    prm_samples: bool = True,
) -> GroupSamples:
    """Policy and reward-model samples of one completed group.

    `reward`: the outcome weight and the two lambdas (default: the paper's, w = 1 and
    lambda = 1 in both equations). `prm_samples`: False when no reward-model learner
    takes them (`train.prm.enabled: false`, a frozen judge): its votes are counted as
    `prm/frozen` and no reward-model prompt is rebuilt.

    `keep_zero_advantage`: also emit samples whose advantage is zero. They carry
    no policy-gradient signal, only their share of the KL term, and each costs a
    full forward and backward pass of a vision-language model; off by default
    (docs/algorithms.md, "zero-advantage samples").

    `replayed`: ids of members put into the group by success replay. Their policy
    samples are marked `replayed` (own behaviour logprobs and version, left out of
    the freshness decision); their votes are not trained again here (they belong
    to their own group: `prm/replayed`), and the band is judged on the group's own
    rollouts, so replay changes nothing of the reward model's samples.
    """
    reward = reward or RewardConfig()
    variant = group.variant
    trajs = {t.id: t for t in group.trajectories if t.outcome is not None}
    out = GroupSamples()
    prm_rewards: dict[str, list[float]] = {}
    for tid, traj in trajs.items():
        votes = _votes_by_step(traj, group.verdicts.get(tid, ()))
        out.rewards[tid] = step_rewards(
            traj.outcome or -1, votes, reward.policy_lam, reward.outcome_weight
        )
        prm_rewards[tid] = step_rewards(traj.outcome or -1, votes, reward.prm_lam)
    screens = _Screens(store, episode)
    for adv in policy_advantages(out.rewards, keep_zero=True):
        traj = trajs[adv.trajectory_id]
        steps = traj.steps[: adv.step_index + 1]
        step = steps[-1]
        if abs(adv.advantage) <= EPS and not keep_zero_advantage:
            out.skipped["policy/zero_advantage"] += 1
            continue
        if not step.token_ids:
            out.skipped["policy/no_tokens"] += 1
            continue
        try:
            urls = [await screens.url(s.screenshot_before) for s in steps]
        except FileNotFoundError:  # deleted under a long-running episode: lose the step
            out.skipped["policy/missing_screenshot"] += 1
            continue
        messages = step_messages(variant.instruction, steps[:-1], urls, traj.screen, episode)
        out.policy.append(
            StepSample(
                tuple(messages),
                step.token_ids,
                step.logprobs,
                step.policy_version,
                adv.advantage,
                trajectory_id=traj.id,
                step_index=step.index,
                replayed=traj.id in replayed,
            )
        )
    own = [t for t in group.trajectories if t.id not in replayed]
    accuracy = sum(1 for t in own if t.outcome == 1) / len(own) if own else 0.0
    eligible = prm_task_eligible(accuracy, band.alpha_low, band.alpha_high)
    for tid, traj in trajs.items():
        for verdict in group.verdicts.get(tid, ()):
            if not prm_samples:
                out.skipped["prm/frozen"] += len(verdict.votes)
                continue
            if tid in replayed:
                out.skipped["prm/replayed"] += len(verdict.votes)
                continue
            if not eligible:
                out.skipped["prm/outside_band"] += len(verdict.votes)
                continue
            step = traj.steps[verdict.step_index]
            advantages = prm_vote_advantages(
                prm_rewards[tid][verdict.step_index], [v.score for v in verdict.votes]
            )
            messages = None
            for vote, advantage in zip(verdict.votes, advantages, strict=True):
                if abs(advantage) <= EPS and not keep_zero_advantage:
                    out.skipped["prm/zero_advantage"] += 1
                    continue
                if not vote.token_ids:
                    out.skipped["prm/no_tokens"] += 1
                    continue
                if messages is None:
                    try:
                        before = await screens.url(step.screenshot_before)
                        after = await screens.url(step.screenshot_after)
                    except FileNotFoundError:
                        out.skipped["prm/missing_screenshot"] += 1
                        continue
                    messages = prm_messages(
                        variant.instruction,
                        [history_line(s) for s in traj.steps[: step.index]],
                        before,
                        step.response,
                        after,
                        parse_error=step.parse_error.message if step.parse_error else None,
                    )
                out.prm.append(
                    StepSample(
                        tuple(messages),
                        vote.token_ids,
                        vote.logprobs,
                        verdict.prm_version,
                        advantage,
                        trajectory_id=traj.id,
                        step_index=step.index,
                    )
                )
    return out
