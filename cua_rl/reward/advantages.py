"""RLAnything's integrated rewards and advantages (docs/algorithms.md).

Step reward (Eq. 1): `R_i = w * O + lambda * mean_j S_ij` joins the trajectory
outcome O with the reward model's m votes on step i (w = 1 in the paper; 0 trains
the policy on the votes alone). Policy advantages standardize R_i across the
trajectories of one task at the same step index; reward-model advantages
standardize `R'_i * S_ij` (Eq. 2, `R'_i = O + lambda' * mean_j S_ij` with its own
lambda') across the m votes of a step, so a vote is rewarded for agreeing with the
integrated signal. Pure functions: no I/O, no model.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

UNPARSEABLE_VOTE_REWARD = -2.0
"""Reward of a reward-model answer without a parseable \\boxed{...} verdict."""

EPS = 1e-6


def step_rewards(
    outcome: int,
    votes_per_step: Sequence[Sequence[int]],
    lam: float = 1.0,
    outcome_weight: float = 1.0,
) -> list[float]:
    """`R_i = w * O + lam * mean_j S_ij` for every step (w: `outcome_weight`); a step
    without votes gets `w * O`."""
    out = []
    for votes in votes_per_step:
        mean = sum(votes) / len(votes) if votes else 0.0
        out.append(outcome_weight * outcome + lam * mean)
    return out


def standardize(values: Sequence[float]) -> list[float]:
    """(x - mean) / std over the group; a group with no spread gets zeros.

    A lone value gets 0 too: with nothing to compare it to there is no baseline,
    and its raw value (e.g. R = -2 on the tail steps of the one trajectory that ran
    longest) would otherwise act as a large advantage decided by the outcome alone.
    """
    if len(values) <= 1:
        return [0.0] * len(values)
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    if std < EPS:
        return [0.0] * len(values)
    return [(v - mean) / std for v in values]


@dataclass(frozen=True, slots=True)
class StepAdvantage:
    trajectory_id: str
    step_index: int
    advantage: float


def policy_advantages(
    rewards_by_trajectory: dict[str, Sequence[float]], *, keep_zero: bool = False
) -> list[StepAdvantage]:
    """Advantages of one task group: at each step index, standardize R_i across
    the trajectories that reached that index (a step index only one trajectory
    reached gets 0). Zero advantages are dropped unless `keep_zero`."""
    longest = max((len(r) for r in rewards_by_trajectory.values()), default=0)
    out: list[StepAdvantage] = []
    for i in range(longest):
        ids = [t for t, r in rewards_by_trajectory.items() if len(r) > i]
        for tid, adv in zip(
            ids, standardize([rewards_by_trajectory[t][i] for t in ids]), strict=True
        ):
            if keep_zero or abs(adv) > EPS:
                out.append(StepAdvantage(tid, i, adv))
    return out


def prm_vote_advantages(step_reward: float, votes: Sequence[int]) -> list[float]:
    """Advantages of the m votes on one step: `R_i * S_ij` (an unparseable vote,
    S = 0, gets -2 instead), standardized across the votes."""
    rewards = [step_reward * s if s != 0 else UNPARSEABLE_VOTE_REWARD for s in votes]
    return standardize(rewards)


def prm_task_eligible(accuracy: float, alpha_low: float = 0.2, alpha_high: float = 0.8) -> bool:
    """Reward-model samples come only from tasks the policy neither always fails
    nor always solves: there the outcome says little about single steps."""
    return alpha_low <= accuracy <= alpha_high
