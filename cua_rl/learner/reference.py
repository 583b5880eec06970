"""The frozen KL reference model shared by both learner engines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cua_rl.inference.hf_engine import load_model
from cua_rl.learner.config import LearnerConfig


def load_reference(cfg: LearnerConfig, model_dir: str | Path, device: Any) -> Any | None:
    """The frozen KL reference (None when the KL term is off, to save its memory)."""
    if cfg.loss.kl_beta <= 0:
        return None
    reference = load_model(cfg.reference_model or model_dir).to(device)
    reference.requires_grad_(False)
    return reference
