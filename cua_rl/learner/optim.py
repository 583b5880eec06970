"""AdamW and its learning-rate schedule, shared by both engines so they step alike."""

from __future__ import annotations

from typing import Any

import torch

from cua_rl.learner.config import LearnerConfig


def build_optimizer(model: torch.nn.Module, cfg: LearnerConfig) -> torch.optim.AdamW:
    """AdamW over the trainable parameters; biases and norm scales (1-D) get no decay,
    as is usual, so weight decay only shrinks matrices."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups: list[dict[str, Any]] = [
        {"params": [p for p in params if p.ndim >= 2], "weight_decay": cfg.weight_decay},
        {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
    ]
    groups = [g for g in groups if g["params"]]
    # foreach=False: one code path on every device, so CPU and GPU runs step identically.
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.betas, eps=cfg.adam_eps, foreach=False)


def build_scheduler(
    optimizer: torch.optim.Optimizer, cfg: LearnerConfig
) -> torch.optim.lr_scheduler.LambdaLR:
    """Constant learning rate after an optional linear warmup of `cfg.warmup_steps` steps."""
    warmup = cfg.warmup_steps

    def factor(step: int) -> float:
        return 1.0 if warmup == 0 else min(1.0, (step + 1) / warmup)

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
