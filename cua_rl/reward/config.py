"""Typed settings of the streaming reward-model judge and of how rewards are composed.

They live with the judge and the reward formulas (reward/), not with the fleet that
starts the judge or the trainer that reads the rewards, so the reward package needs
nothing of rollout or config (docs/architecture.md, "Layers").
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

log = logging.getLogger(__name__)


class JudgeConfig(BaseModel):
    """The streaming process reward model."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    """Judge every step; off for evaluation runs."""
    votes: int = Field(3, ge=1, le=16)
    """m: votes per step, sampled with `n` in one request."""
    temperature: float = Field(0.8, ge=0.0)
    """Sampling temperature of the m votes (paper: 0.8; votes must differ to carry signal)."""
    max_tokens: int = Field(512, ge=1)
    """Tokens per vote; a truncated vote is unparseable (score 0, PRM reward -2)."""
    max_in_flight: int = Field(1024, ge=1)
    """Cap on concurrent judge requests of one process (backpressure)."""


class RewardConfig(BaseModel):
    """How the outcome O and the reward model's votes S_ij make the two rewards
    (docs/algorithms.md, "Rewards and advantages"):

    - the policy's step reward (Eq. 1): `R_i = w * O + policy_lam * mean_j S_ij`;
    - the reward model's per-vote reward (Eq. 2): `(O + prm_lam * mean_j S_ij) * S_ij`.

    The paper's setting is w = 1 and one lambda = 1 in both; its Table 2 varies the two
    lambdas apart, its section 3.2.6 trains the policy on the votes alone (w = 0)."""

    model_config = ConfigDict(extra="forbid")

    outcome_weight: float = Field(1.0, ge=0.0)
    """w in Eq. 1. 0: reward-model-only supervision, the policy never sees the
    evaluator's outcome (the outcome still decides task accuracy, adaptation and, when
    the reward model trains, its Eq. 2 reward)."""
    policy_lam: float = Field(1.0, ge=0.0)
    """lambda of Eq. 1: the weight of the mean vote in the policy's step reward
    (0 with w = 1: outcome-only reward, plain GRPO)."""
    prm_lam: float = Field(1.0, ge=0.0)
    """lambda of Eq. 2: the weight of the mean vote in the integrated reward that each
    vote is multiplied by when the reward model trains."""

    @model_validator(mode="after")
    def _some_signal(self) -> RewardConfig:
        if self.outcome_weight == 0 and self.policy_lam == 0:
            raise ValueError(
                "outcome_weight 0 and policy_lam 0 leave the policy no reward; "
                "set one of them above 0"
            )
        return self


LEGACY_LAM = "lam"
"""`train.lam`, the one lambda of both rewards before they were split (still read)."""


def reward_from_train_section(train: dict[str, Any], *, notice: bool = True) -> dict[str, Any]:
    """`train` with the old `lam` key read as both lambdas (`reward.policy_lam` and
    `reward.prm_lam`), as runs made before the split meant it. `notice`: say so in one
    line (a user's config); a stored run's config is read silently. A `lam` given
    together with either new key is refused: which one was meant is unknown."""
    if LEGACY_LAM not in train:
        return train
    out = dict(train)
    lam = out.pop(LEGACY_LAM)
    reward = dict(out.get("reward") or {})
    both = [k for k in ("policy_lam", "prm_lam") if k in reward]
    if both:
        raise ValueError(
            f"train.lam and train.reward.{both[0]} are both set: train.lam is "
            "the old key for both lambdas; keep train.reward.policy_lam and "
            "train.reward.prm_lam only"
        )
    reward.update(policy_lam=lam, prm_lam=lam)
    out["reward"] = reward
    if notice:
        log.warning(
            "train.lam=%s is read as train.reward.policy_lam and "
            "train.reward.prm_lam (the key was split; docs/algorithms.md)",
            lam,
        )
    return out


def stored_reward(config: dict[str, Any]) -> RewardConfig:
    """The reward settings a stored run was made with, from its saved config (the run
    store's `config_json`): new keys, or the old `train.lam` read as both lambdas; a
    config without either has the defaults (the paper's)."""
    train = config.get("train") if isinstance(config, dict) else None
    if not isinstance(train, dict):
        return RewardConfig()
    section = reward_from_train_section(train, notice=False).get("reward") or {}
    return RewardConfig.model_validate(section)
