"""The one place that chooses a learner engine (kept out of `base`, so the base
class never imports its subclasses)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from cua_rl.learner.base import TrainEngine
from cua_rl.learner.config import LearnerConfig
from cua_rl.learner.engine_group import RankTransport

TransportFactory = Callable[[LearnerConfig, str, str, Path], RankTransport]
"""(config, model_dir, name, log_dir) -> the ranks of a group (Ray passes its own)."""


def build_engine(
    cfg: LearnerConfig,
    model_dir: str | Path,
    *,
    name: str = "learner",
    log_dir: Path | None = None,
    transport: TransportFactory | None = None,
    grouped: bool = False,
) -> TrainEngine:
    """The engine `cfg.engine` names, loading weights from `model_dir`. Imports torch.

    `cfg.ranks` > 1, or `grouped` (a GPU learner of one rank under Ray, which must be
    Ray's to place): a `RankGroupEngine` over `transport` (default: rank processes on
    this machine, logging to `log_dir/<name>-rank<r>.log`)."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # quiet logs: loading is not long work worth a bar
    if cfg.ranks > 1 or grouped:
        from cua_rl.learner.engine_group import RankGroupEngine
        from cua_rl.learner.rank_process import ProcessRanks

        logs = log_dir or Path(tempfile.mkdtemp(prefix=f"cua-rl-{name}-ranks-"))
        if transport is None:
            ranks: RankTransport = ProcessRanks(cfg, str(model_dir), name=name, log_dir=logs)
        else:
            ranks = transport(cfg, str(model_dir), name, logs)
        return RankGroupEngine(cfg, model_dir, ranks)
    if cfg.engine.type == "deepspeed":
        from cua_rl.learner.engine_deepspeed import DeepSpeedTrainEngine

        return DeepSpeedTrainEngine(cfg, model_dir)
    from cua_rl.learner.engine_torch import TorchTrainEngine

    return TorchTrainEngine(cfg, model_dir)
