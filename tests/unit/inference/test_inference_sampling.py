"""The behavior-logprob definition the learner relies on (sampling.py)."""

import math

import pytest
import torch

from cua_rl.inference.sampling import (
    SamplingParams,
    behavior_logprobs,
    make_generator,
    nucleus_mask,
    sample_token,
)


def test_logprobs_are_of_the_temperature_scaled_distribution() -> None:
    logits = torch.tensor([2.0, 1.0, 0.0, -1.0])
    expected = torch.log_softmax(logits / 0.5, dim=-1)
    assert torch.allclose(behavior_logprobs(logits, 0.5), expected)


def test_greedy_uses_argmax_and_temperature_one_logprobs() -> None:
    logits = torch.tensor([0.1, 3.0, 0.2])
    token, logprob = sample_token(logits, SamplingParams(temperature=0.0), make_generator(0))
    assert token == 1
    assert logprob == pytest.approx(torch.log_softmax(logits, -1)[1].item())


def test_top_p_restricts_the_support_but_not_the_reported_logprob() -> None:
    logits = torch.tensor([3.0, 2.9, -5.0, -6.0])
    params = SamplingParams(temperature=1.0, top_p=0.5)
    full = torch.log_softmax(logits, -1)
    generator = make_generator(0)
    for _ in range(50):
        token, logprob = sample_token(logits, params, generator)
        assert token in (0, 1)
        assert logprob == pytest.approx(full[token].item())


def test_nucleus_keeps_at_least_the_top_token() -> None:
    logprobs = torch.log_softmax(torch.tensor([10.0, 0.0, 0.0]), -1)
    assert nucleus_mask(logprobs, 1e-6).tolist() == [True, False, False]
    assert nucleus_mask(logprobs, 1.0).all()


def test_seeded_generators_reproduce_samples() -> None:
    logits = torch.zeros(100)
    params = SamplingParams(temperature=1.0)
    a = [sample_token(logits, params, g)[0] for g in [make_generator(7)] for _ in range(20)]
    b = [sample_token(logits, params, g)[0] for g in [make_generator(7)] for _ in range(20)]
    assert a == b
    assert all(
        lp == pytest.approx(-math.log(100))
        for _, lp in (sample_token(logits, params, make_generator(1)) for _ in range(3))
    )
