"""Typed settings of the learning demo (`cua-rl train --preset learn-demo`)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class DemoConfig(BaseModel):
    """Evaluation passes around a training run: the starting variant is played
    `eval_rollouts` times with the initial policy before training and with the
    final policy after it, at one temperature, so the two success rates compare."""

    model_config = ConfigDict(extra="forbid")

    eval_rollouts: int = Field(0, ge=0)
    """Rollouts of each evaluation pass; 0 turns the demo off (a plain training run)."""
    eval_temperature: float | None = Field(None, ge=0.0)
    """Policy temperature of both passes; None: episode.temperature (the training one)."""
