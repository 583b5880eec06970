"""How an update is split over a learner's ranks, and the rank count of a checkpoint
(pure: no model, no process)."""

from __future__ import annotations

import random

import pytest

from cua_rl.errors import ConfigError
from cua_rl.learner.checkpoint_ranks import check_ranks, saved_ranks, write_ranks
from cua_rl.learner.config import DeepSpeedEngineConfig, LearnerConfig
from cua_rl.types import StepSample

pytest.importorskip("torch")  # the aggregation weights come from loss.py

from cua_rl.learner.loss import sample_token_weights  # noqa: E402
from cua_rl.learner.rank_split import contiguous_chunks, split_update  # noqa: E402


def sample(i: int, response: int, trajectory: str = "") -> StepSample:
    return StepSample(
        ({"role": "user", "content": f"s{i}"},),
        tuple(range(response)),
        tuple([-1.0] * response),
        0,
        advantage=1.0,
        trajectory_id=trajectory or f"t{i % 3}",
        step_index=i,
    )


@pytest.mark.parametrize("ranks", [2, 3, 8])
@pytest.mark.parametrize("mini_batches", [1, 2])
def test_every_sample_once_and_tokens_within_one_sample_of_equal(
    ranks: int, mini_batches: int
) -> None:
    rng = random.Random(ranks * 10 + mini_batches)
    samples = [sample(i, rng.randint(1, 40)) for i in range(37)]
    lengths = [rng.randint(50, 900) for _ in samples]
    shares = split_update(samples, lengths, ranks, mini_batches, "step")
    assert split_update(samples, lengths, ranks, mini_batches, "step") == shares  # deterministic
    chunks = contiguous_chunks(len(samples), mini_batches)
    for m, chunk in enumerate(chunks):
        got = sorted(s.step_index for share in shares for s in share.mini_batches[m])
        assert got == chunk  # the single-process mini-batches, each sample once
        loads = [sum(lengths[s.step_index] for s in share.mini_batches[m]) for share in shares]
        mean = sum(loads) / ranks
        assert max(abs(load - mean) for load in loads) <= max(lengths[i] for i in chunk)
    assert sum(s.tokens for s in shares) == sum(lengths)
    if mini_batches == 1:  # the update's tokens: within one sample of an equal split
        mean = sum(lengths) / ranks
        assert max(abs(s.tokens - mean) for s in shares) <= max(lengths)


def test_weights_are_those_of_the_whole_mini_batch() -> None:
    """A trajectory's steps split over ranks still share 1/steps (trajectory mean)."""
    samples = [sample(i, 5 + i, trajectory="a" if i < 4 else "b") for i in range(6)]
    shares = split_update(samples, [100] * 6, 2, 1, "trajectory")
    expected = sample_token_weights(
        "trajectory", [5 + i for i in range(6)], [s.trajectory_id for s in samples]
    )
    for share in shares:
        for s, w in zip(share.mini_batches[0], share.weights[0], strict=True):
            assert w == pytest.approx(expected[s.step_index])
    assert {s.trajectory_id for s in shares[0].mini_batches[0]} == {"a", "b"}


def test_a_rank_without_samples_gets_a_filler() -> None:
    samples = [sample(0, 4), sample(1, 4)]
    shares = split_update(samples, [10, 20], 3, 1, "token")
    assert [s.samples for s in shares] == [1, 1, 0]
    assert shares[2].filler is not None and shares[0].filler is None


def test_checkpoint_rank_count(tmp_path) -> None:
    assert saved_ranks(tmp_path) == 1  # no ranks.json: one process wrote it
    write_ranks(tmp_path, 2, "deepspeed", 3)
    check_ranks(tmp_path, 2)
    with pytest.raises(ConfigError, match=r"saved by 2 learner rank\(s\) but this run has 3"):
        check_ranks(tmp_path, 3)
    (tmp_path / "ranks.json").write_text("{not json")
    with pytest.raises(ConfigError, match="ranks.json: expected JSON"):
        saved_ranks(tmp_path)


def test_ranks_need_the_deepspeed_engine() -> None:
    from pydantic import ValidationError

    assert LearnerConfig(ranks=2, engine=DeepSpeedEngineConfig()).ranks == 2
    with pytest.raises(ValidationError, match="needs engine.type=deepspeed"):
        LearnerConfig(ranks=2)
