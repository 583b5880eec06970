"""Packing, the optimizer schedule and learner config defaults (pure, no model)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from cua_rl.learner.config import DeepSpeedEngineConfig, LearnerConfig


def test_pack_by_length_fits_the_budget_and_keeps_every_item_once() -> None:
    pytest.importorskip("torch")
    from cua_rl.learner.batching import pack_by_length

    lengths = [50, 10, 300, 40, 45, 12, 11]
    groups = pack_by_length(lengths, max_tokens=100)
    assert sorted(i for g in groups for i in g) == list(range(len(lengths)))
    assert groups[0] == [2]  # too long for the budget: alone, and first
    for group in groups[1:]:
        assert max(lengths[i] for i in group) * len(group) <= 100


def test_constant_schedule_with_linear_warmup() -> None:
    torch = pytest.importorskip("torch")
    from cua_rl.learner.optim import build_optimizer, build_scheduler

    cfg = LearnerConfig(lr=1e-3, warmup_steps=4, weight_decay=0.1)
    model = torch.nn.Linear(2, 2)
    optimizer = build_optimizer(model, cfg)
    scheduler = build_scheduler(optimizer, cfg)
    lrs = []
    for _ in range(6):
        lrs.append(scheduler.get_last_lr()[0])
        optimizer.step()
        scheduler.step()
    assert lrs == pytest.approx([2.5e-4, 5e-4, 7.5e-4, 1e-3, 1e-3, 1e-3])
    # Biases are not decayed.
    assert [g["weight_decay"] for g in optimizer.param_groups] == [0.1, 0.0]


def test_learner_config_defaults_and_engine_union() -> None:
    cfg = LearnerConfig()
    assert cfg.engine.type == "torch"
    assert (cfg.lr, cfg.grad_clip, cfg.loss.clip_eps, cfg.loss.is_cap, cfg.loss.kl_beta) == (
        1e-6,
        1.0,
        0.2,
        2.0,
        0.01,
    )
    ds = LearnerConfig.model_validate({"engine": {"type": "deepspeed", "zero_stage": 3}})
    assert isinstance(ds.engine, DeepSpeedEngineConfig) and ds.engine.zero_stage == 3
    with pytest.raises(ValidationError):
        LearnerConfig.model_validate({"engine": {"type": "deepspeed", "zero_stage": 4}})
    with pytest.raises(ValidationError):
        LearnerConfig.model_validate({"loss": {"is_mode": "clip"}})
