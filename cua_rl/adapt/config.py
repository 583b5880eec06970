"""Typed settings of task adaptation (Algorithm 2): the band, the rewriter, the critique.

Kept apart from the rewriter and the critic so that loading a run's configuration
imports none of their message building or model-client code.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from cua_rl.adapt.acceptance import AdaptBand
from cua_rl.inference.config import ModelServersConfig


class RewriterConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["model", "rules"] = "rules"
    """`model`: an LLM writes the instruction (the paper's way, and the only one for
    tasks without pre-built variants or hints); `rules`: recorded variants and hints
    (no model; adapts only tasks that have them)."""
    pool: ModelServersConfig = Field(default_factory=ModelServersConfig)
    """The rewriter's own model pool, started only for `type: model` and never
    trained or synced (paper: Qwen3-4B). Default: the tiny model on one hf replica."""
    candidates: int = Field(3, ge=1, le=16)
    """k: answers sampled from the model; the first valid one is kept."""
    temperature: float = Field(1.0, ge=0.0)
    """Sampling temperature of the k answers (they should differ)."""
    max_tokens: int = Field(512, ge=1)
    """Tokens per answer; a thinking model needs room to reason before the JSON."""


class CritiqueConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    temperature: float = Field(0.0, ge=0.0)
    """Summaries should be stable: greedy by default."""
    max_tokens: int = Field(256, ge=1)
    """Tokens per summary answer; a thinking model needs thousands (the paper preset sets 2048)."""
    max_flagged_steps: int = Field(8, ge=1)
    """Summarize at most this many flagged steps per trajectory (latest first)."""


class AdaptConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    """Rewrite tasks whose accuracy leaves the band (Algorithm 2)."""
    band: AdaptBand = Field(default_factory=AdaptBand)
    rewriter: RewriterConfig = Field(default_factory=RewriterConfig)
    critique: CritiqueConfig = Field(default_factory=CritiqueConfig)
    difficulty: Path | None = None
    """JSON {task_id: [variant names easiest->hardest]} (or {order, hints});
    None: the task source's own `difficulty.json` (a pair folder's, a
    `tasks.templates_root`'s, or the local suite's for the project's templates)."""
