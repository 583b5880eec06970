"""The one place that chooses a learner engine (kept out of `base`, so the base
class never imports its subclasses)."""

from __future__ import annotations

from pathlib import Path

from cua_rl.learner.base import TrainEngine
from cua_rl.learner.config import LearnerConfig


def build_engine(cfg: LearnerConfig, model_dir: str | Path) -> TrainEngine:
    """The engine `cfg.engine` names, loading weights from `model_dir`. Imports torch."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # quiet logs: loading is not long work worth a bar
    if cfg.engine.type == "deepspeed":
        from cua_rl.learner.engine_deepspeed import DeepSpeedTrainEngine

        return DeepSpeedTrainEngine(cfg, model_dir)
    from cua_rl.learner.engine_torch import TorchTrainEngine

    return TorchTrainEngine(cfg, model_dir)
