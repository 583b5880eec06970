"""Typed settings of the streaming reward-model judge.

They live with the judge (reward/), not with the fleet that starts it, so the
reward package needs nothing of rollout (docs/architecture.md, "Layers").
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


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
