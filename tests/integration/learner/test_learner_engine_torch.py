"""The torch engine on the tiny model: updates, PPO epochs, exact resume from a checkpoint."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests_support.learner_data import prompts

torch = pytest.importorskip("torch")

from cua_rl.learner.config import LearnerConfig, LossConfig  # noqa: E402
from cua_rl.learner.engine_torch import TorchTrainEngine  # noqa: E402
from cua_rl.learner.engines import build_engine  # noqa: E402
from cua_rl.types import StepSample  # noqa: E402

pytestmark = pytest.mark.model


def batch(seed: int) -> list[StepSample]:
    """Synthetic samples on real prompts: arbitrary tokens, near-uniform behavior logprobs."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for i, messages in enumerate(prompts() * 2):
        n = 4 + 3 * i
        tokens = torch.randint(50, 3000, (n,), generator=gen).tolist()
        behavior = (-8.3 + 0.1 * torch.randn(n, generator=gen)).tolist()
        out.append(
            StepSample(
                tuple(messages),
                tuple(tokens),
                tuple(behavior),
                0,
                advantage=[1.0, -0.5, 0.7, -1.2][i],
            )
        )
    return out


def config(**overrides: object) -> LearnerConfig:
    base = dict(lr=1e-3, weight_decay=0.01, warmup_steps=2, micro_batch_tokens=600)
    return LearnerConfig.model_validate({**base, **overrides})


def weights(engine: TorchTrainEngine) -> dict[str, torch.Tensor]:
    return {n: t.clone() for n, t in engine.named_parameters()}


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


def test_train_step_updates_weights_and_reports_metrics(tiny_model_dir: Path) -> None:
    engine = build_engine(config(), tiny_model_dir)
    start = weights(engine)
    metrics = engine.train_step(batch(0))
    assert engine.version == 1 and engine.optimizer_steps == 1
    assert metrics["ratio"] == pytest.approx(1.0, abs=1e-6)
    assert metrics["clip_frac"] == 0.0 and metrics["kl"] == pytest.approx(0.0, abs=1e-9)
    assert metrics["response_tokens"] == sum(len(s.response_token_ids) for s in batch(0))
    assert metrics["lr"] == pytest.approx(1e-3)  # warmup of 2: the second step is at peak
    assert 0 < metrics["grad_norm"] < float("inf")
    assert any(not torch.equal(t, start[n]) for n, t in weights(engine).items())
    second = engine.train_step(batch(1))
    assert second["kl"] > 0  # the policy has moved away from the reference


def test_mini_batches_step_against_one_proximal_policy(tiny_model_dir: Path) -> None:
    engine = build_engine(config(mini_batches=2, loss=LossConfig(clip_eps=0.01)), tiny_model_dir)
    metrics = engine.train_step(batch(0))
    assert engine.version == 1 and engine.optimizer_steps == 2
    # The second mini-batch sees weights moved by the first: ratios leave 1 and some clip.
    assert metrics["ratio"] != pytest.approx(1.0, abs=1e-6)
    assert metrics["clip_frac"] > 0


def test_checkpoint_resume_reproduces_the_next_step(tiny_model_dir: Path, tmp_path: Path) -> None:
    cfg = config()
    first = TorchTrainEngine(cfg, tiny_model_dir)
    first.train_step(batch(0))
    first.train_step(batch(1))
    first.save_checkpoint(tmp_path / "ckpt")
    first.train_step(batch(2))
    expected = weights(first)

    resumed = TorchTrainEngine(cfg, tiny_model_dir)
    resumed.load_checkpoint(tmp_path / "ckpt")
    assert (resumed.version, resumed.optimizer_steps) == (2, 2)
    resumed.train_step(batch(2))
    for name, tensor in weights(resumed).items():
        torch.testing.assert_close(tensor, expected[name], atol=1e-6, rtol=0, msg=name)
    assert resumed.scheduler.get_last_lr() == first.scheduler.get_last_lr()


def test_load_checkpoint_names_the_missing_file(tiny_model_dir: Path, tmp_path: Path) -> None:
    engine = TorchTrainEngine(config(loss=LossConfig(kl_beta=0)), tiny_model_dir)
    assert engine.reference is None
    with pytest.raises(FileNotFoundError, match="train_state.pt"):
        engine.load_checkpoint(tmp_path)


@pytest.mark.parametrize("loss", [{"kind": "gspo"}, {"is_mode": "mask", "is_cap": 1.05}])
def test_loss_variants_train(loss: dict, tiny_model_dir: Path) -> None:
    engine = build_engine(config(loss=loss), tiny_model_dir)
    metrics = engine.train_step(batch(0))
    assert metrics["ratio"] == pytest.approx(1.0, abs=1e-6)
    assert 0 < metrics["grad_norm"] < float("inf")
    if loss.get("is_mode") == "mask":
        # Behavior logprobs are -8.3 +- 0.1 around the model's: some weights exceed 1.05.
        assert 0 < metrics["is_capped_frac"] < 1
        assert metrics["is_weight"] < metrics["is_weight_raw"]
