"""`entropy_top_fraction` on the tiny model: only the chosen high-entropy steps train,
exactly as training on them alone would, and the others are counted as unused."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest
from tests_support.learner_runs import text_samples

torch = pytest.importorskip("torch")

from cua_rl.learner.batching import collate, encode_sample  # noqa: E402
from cua_rl.learner.config import LearnerConfig, LearnerLoopConfig  # noqa: E402
from cua_rl.learner.engines import build_engine  # noqa: E402
from cua_rl.learner.logprobs import position_ids  # noqa: E402
from cua_rl.learner.service import LearnerService  # noqa: E402
from cua_rl.store.async_run_store import AsyncRunStore  # noqa: E402
from cua_rl.types import StepSample  # noqa: E402

pytestmark = pytest.mark.model

T = 0.05
"""A low sampling temperature sharpens the tiny model's near-uniform distributions,
so the steps' entropies are well apart (about 1.8 to 2.7 nats)."""


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


def _samples() -> list[StepSample]:
    """Six steps of three trajectories (two steps each), mixed advantages."""
    out = text_samples(0) + text_samples(1)
    return [replace(s, trajectory_id=f"traj{i % 3}", step_index=i // 3) for i, s in enumerate(out)]


def _config(**overrides: object) -> LearnerConfig:
    base = dict(lr=1e-3, temperature=T, micro_batch_tokens=64, loss={"aggregation": "trajectory"})
    return LearnerConfig.model_validate({**base, **overrides})


def _entropies(engine: object, samples: list[StepSample]) -> list[float]:
    """Each sample's mean token entropy, computed here from the model's own logits,
    one sample at a time (not through the learner's selection code)."""
    out = []
    model, processor = engine.model, engine.processor  # type: ignore[attr-defined]
    for s in samples:
        mb = collate([encode_sample(processor, s)], processor.tokenizer.pad_token_id)
        with torch.no_grad():
            logits = (
                model(**mb.inputs, position_ids=position_ids(model, mb.inputs), use_cache=False)
                .logits[0]
                .float()
            )
        predictors = mb.response_mask[0].nonzero()[:, 0] - 1
        logp = torch.log_softmax(logits[predictors] / T, -1)
        out.append(float(-(logp.exp() * logp).sum(-1).mean()))
    return out


def _weights(engine: object) -> dict[str, torch.Tensor]:
    return {n: t.clone() for n, t in engine.named_parameters()}  # type: ignore[attr-defined]


def _assert_same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    for name, tensor in a.items():
        torch.testing.assert_close(tensor, b[name], rtol=1e-5, atol=1e-7, msg=name)


def test_only_the_high_entropy_steps_train(tiny_model_dir: Path) -> None:
    samples = _samples()
    selecting = build_engine(_config(entropy_top_fraction=0.5), tiny_model_dir)
    entropy = _entropies(selecting, samples)
    top = sorted(sorted(range(6), key=lambda i: -entropy[i])[:3])
    assert len({round(e, 3) for e in entropy}) == 6, entropy  # no near-ties
    metrics = selecting.train_step(samples)
    assert (metrics["samples_trained"], metrics["samples_low_entropy"]) == (3.0, 3.0)
    assert metrics["entropy_threshold"] == pytest.approx(min(entropy[i] for i in top), abs=1e-4)
    assert metrics["samples"] == 6.0

    alone = build_engine(_config(), tiny_model_dir)  # switch off, the chosen steps only
    expected = alone.train_step([samples[i] for i in top])
    _assert_same(_weights(selecting), _weights(alone))
    # Adam's first step hardly depends on the loss's scale: the loss and the gradient
    # norm (taken before clipping) check the normalisation over the chosen steps.
    for key in ("loss", "grad_norm", "pg_loss", "response_tokens"):
        if key == "response_tokens":  # every step of the update is still reported
            assert metrics[key] == sum(len(s.response_token_ids) for s in samples)
        else:
            assert metrics[key] == pytest.approx(expected[key], rel=1e-5), key

    everything = build_engine(_config(), tiny_model_dir)  # switch off, every step
    everything.train_step(samples)
    changed = [
        n
        for n, t in _weights(everything).items()
        if not torch.allclose(t, _weights(alone)[n], rtol=1e-5, atol=1e-7)
    ]
    assert changed, "training every step should differ from training the chosen ones"


def test_fraction_one_trains_every_step_as_with_the_switch_off(tiny_model_dir: Path) -> None:
    samples = _samples()
    on = build_engine(_config(entropy_top_fraction=1.0, mini_batches=2), tiny_model_dir)
    off = build_engine(_config(mini_batches=2), tiny_model_dir)
    assert on.train_step(samples)["samples_low_entropy"] == 0.0
    off.train_step(samples)
    _assert_same(_weights(on), _weights(off))


async def test_unchosen_steps_are_counted_as_unused(tiny_model_dir: Path, tmp_path: Path) -> None:
    engine = build_engine(_config(entropy_top_fraction=0.34), tiny_model_dir)
    store = AsyncRunStore.open(tmp_path / "run")
    service = LearnerService(
        "policy",
        engine,
        store,
        LearnerLoopConfig(),
        checkpoint_dir=tmp_path / "ckpt",
        tasks_per_update=1,
    )
    try:
        run = asyncio.create_task(service.run(max_updates=1))
        assert await service.submit(_samples(), "g") == 6
        await asyncio.wait_for(run, 120)
        counters = await store.counters()
    finally:
        await service.close()
        await store.close()
    # ceil(0.34 x 6) = 3 steps train; the other 3 are unused, and nothing is lost.
    assert (service.samples_used, service.unused_low_entropy) == (3, 3)
    assert counters["policy_samples_used"] == 3 and counters["policy_unused_low_entropy"] == 3
    assert service.samples_collected == (
        service.samples_used
        + service.stale_dropped
        + service.unused_at_end
        + service.unused_low_entropy
    )
