"""The off-policy-corrected loss, checked on logprobs and logits directly (no model)."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from cua_rl.learner.config import LossConfig  # noqa: E402
from cua_rl.learner.loss import policy_loss, sample_token_weights  # noqa: E402

NO_KL = LossConfig(kl_beta=0.0)


def _logits(seed: int = 0, n: int = 6, vocab: int = 11) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(n, vocab, generator=gen, dtype=torch.float64, requires_grad=True)
    tokens = torch.randint(0, vocab, (n,), generator=gen)
    return logits, tokens


def _token_logp(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    return torch.log_softmax(logits, -1).gather(-1, tokens[:, None])[:, 0]


def _grad(loss: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    (grad,) = torch.autograd.grad(loss, logits)
    return grad


def test_equal_policies_give_the_plain_policy_gradient() -> None:
    logits, tokens = _logits()
    adv = torch.tensor([1.0, -0.5, 2.0, 0.0, -1.5, 0.3], dtype=torch.float64)
    logp = _token_logp(logits, tokens)
    terms = policy_loss(logp, logp.detach(), logp.detach(), adv, NO_KL, normalizer=6)
    expected = _grad(-(adv * _token_logp(logits, tokens)).mean(), logits)
    torch.testing.assert_close(_grad(terms.loss, logits), expected)
    assert terms.sums["is_weight"] == pytest.approx(6.0)
    assert terms.sums["clip_frac"] == 0.0


def test_behavior_weight_scales_the_gradient_and_is_capped_at_c() -> None:
    logits, tokens = _logits(1, n=3)
    adv = torch.ones(3, dtype=torch.float64)
    logp = _token_logp(logits, tokens)
    # prox - behavior = log 1.5 (kept), log 3 (capped to 2), log 0.5 (kept).
    behavior = logp.detach() - torch.tensor(
        [math.log(1.5), math.log(3.0), math.log(0.5)], dtype=torch.float64
    )
    terms = policy_loss(logp, logp.detach(), behavior, adv, NO_KL, normalizer=3)
    weights = torch.tensor([1.5, 2.0, 0.5], dtype=torch.float64)
    expected = _grad(-(weights * adv * _token_logp(logits, tokens)).mean(), logits)
    torch.testing.assert_close(_grad(terms.loss, logits), expected)
    assert terms.sums["is_capped_frac"] == 1.0
    assert terms.sums["is_weight"] == pytest.approx(4.0)


def test_mask_mode_drops_tokens_above_c() -> None:
    logits, tokens = _logits(2, n=3)
    adv = torch.ones(3, dtype=torch.float64)
    logp = _token_logp(logits, tokens)
    behavior = logp.detach() - torch.tensor([0.0, math.log(3.0), 0.0], dtype=torch.float64)
    cfg = LossConfig(kl_beta=0.0, is_mode="mask")
    terms = policy_loss(logp, logp.detach(), behavior, adv, cfg, normalizer=3)
    keep = torch.tensor([1.0, 0.0, 1.0], dtype=torch.float64)
    expected = _grad(-(keep * _token_logp(logits, tokens)).sum() / 3, logits)
    grad = _grad(terms.loss, logits)
    torch.testing.assert_close(grad, expected)
    assert grad[1].abs().max() == 0.0


def test_k3_kl_is_zero_with_zero_gradient_at_the_reference() -> None:
    logits, tokens = _logits(3)
    logp = _token_logp(logits, tokens)
    cfg = LossConfig(kl_beta=0.01)
    zeros = torch.zeros(6, dtype=torch.float64)
    terms = policy_loss(
        logp, logp.detach(), logp.detach(), zeros, cfg, normalizer=6, ref_logp=logp.detach()
    )
    assert terms.loss.item() == 0.0
    assert terms.sums["kl"] == 0.0
    assert _grad(terms.loss, logits).abs().max().item() == 0.0


def test_k3_kl_is_positive_and_pulls_towards_the_reference() -> None:
    logp = torch.tensor([-1.0, -2.0], dtype=torch.float64, requires_grad=True)
    ref = torch.tensor([-1.5, -1.0], dtype=torch.float64)
    cfg = LossConfig(kl_beta=1.0)
    zeros = torch.zeros(2, dtype=torch.float64)
    terms = policy_loss(logp, logp.detach(), logp.detach(), zeros, cfg, normalizer=2, ref_logp=ref)
    delta = ref - logp.detach()
    assert terms.loss.item() == pytest.approx(float((delta.exp() - delta - 1).mean()))
    (grad,) = torch.autograd.grad(terms.loss, logp)
    # Descending the gradient moves logp towards ref: the signs are opposite to (ref - logp).
    assert (grad * delta < 0).all()


@pytest.mark.parametrize(
    ("log_ratio", "advantage", "has_grad"),
    [
        (math.log(1.5), 1.0, False),  # above 1 + eps, advantage pushes up: clipped
        (math.log(0.5), -1.0, False),  # below 1 - eps, advantage pushes down: clipped
        (math.log(1.5), -1.0, True),  # above the range but the advantage pulls back
        (math.log(0.5), 1.0, True),  # below the range but the advantage pulls back
        (math.log(1.1), 1.0, True),  # inside the range
    ],
)
def test_clipping_stops_gradient_outside_the_trust_region(
    log_ratio: float, advantage: float, has_grad: bool
) -> None:
    logp = torch.tensor([-2.0], dtype=torch.float64, requires_grad=True)
    prox = logp.detach() - log_ratio
    adv = torch.tensor([advantage], dtype=torch.float64)
    terms = policy_loss(logp, prox, prox, adv, NO_KL, normalizer=1)
    (grad,) = torch.autograd.grad(terms.loss, logp)
    assert (grad.abs().item() > 0) == has_grad
    assert terms.sums["clip_frac"] == (0.0 if has_grad else 1.0)
    if has_grad:
        assert grad.item() == pytest.approx(-advantage * math.exp(log_ratio))


def test_gspo_with_equal_policies_is_the_sequence_mean_policy_gradient() -> None:
    logits, tokens = _logits(4, n=5)
    seq = torch.tensor([0, 0, 0, 1, 1])
    adv = torch.tensor([1.0, 1.0, 1.0, -2.0, -2.0], dtype=torch.float64)
    logp = _token_logp(logits, tokens)
    cfg = LossConfig(kind="gspo", kl_beta=0.0)
    weights = sample_token_weights("step", [3, 2], ["a", "b"])
    token_w = torch.tensor([weights[int(i)] for i in seq], dtype=torch.float64)
    terms = policy_loss(
        logp,
        logp.detach(),
        logp.detach(),
        adv,
        cfg,
        normalizer=float(token_w.sum()),
        seq_index=seq,
        token_weights=token_w,
    )
    lp = _token_logp(logits, tokens)
    expected_loss = -(1.0 * lp[:3].mean() + -2.0 * lp[3:].mean()) / 2
    torch.testing.assert_close(_grad(terms.loss, logits), _grad(expected_loss, logits))
    assert terms.count == pytest.approx(2.0)


def test_gspo_clips_the_whole_sequence() -> None:
    logp = torch.tensor([-1.0, -1.0], dtype=torch.float64, requires_grad=True)
    prox = logp.detach() - 0.01  # sequence ratio e^0.01 is far above 1 + 4e-4
    adv = torch.ones(2, dtype=torch.float64)
    cfg = LossConfig(kind="gspo", kl_beta=0.0)
    terms = policy_loss(logp, prox, prox, adv, cfg, normalizer=1, seq_index=torch.tensor([0, 0]))
    (grad,) = torch.autograd.grad(terms.loss, logp)
    assert grad.abs().max().item() == 0.0
    assert terms.sums["clip_frac"] == pytest.approx(1.0)


def test_kl_needs_reference_and_gspo_needs_sequences() -> None:
    logp = torch.zeros(2)
    with pytest.raises(ValueError, match="reference"):
        policy_loss(logp, logp, logp, logp, LossConfig(), normalizer=2)
    with pytest.raises(ValueError, match="seq_index"):
        policy_loss(logp, logp, logp, logp, LossConfig(kind="gspo", kl_beta=0), normalizer=2)


def test_aggregation_weights_hand_computed() -> None:
    # samples: a0 (4 tokens), a1 (2 tokens) of trajectory a; b0 (2 tokens) of b
    lens, tids = [4, 2, 2], ["a", "a", "b"]
    assert sample_token_weights("token", lens, tids) == [1.0, 1.0, 1.0]
    assert sample_token_weights("step", lens, tids) == [0.25, 0.5, 0.5]
    # trajectory: a's two steps share a's unit weight, b's one step has b's
    assert sample_token_weights("trajectory", lens, tids) == [0.125, 0.25, 0.5]
    # the weights sum (over tokens) to the number of tokens, samples, trajectories
    for kind, total in (("token", 8), ("step", 3), ("trajectory", 2)):
        w = sample_token_weights(kind, lens, tids)
        assert sum(wi * n for wi, n in zip(w, lens, strict=True)) == pytest.approx(total)
    # a sample without a trajectory id is its own trajectory
    assert sample_token_weights("trajectory", [2, 2], ["", ""]) == [0.5, 0.5]


@pytest.mark.parametrize("aggregation", ["token", "step", "trajectory"])
def test_aggregated_loss_is_the_weighted_mean_of_token_terms(aggregation: str) -> None:
    # 8 tokens: a0 = 4 tokens (adv 1), a1 = 2 tokens (adv 1), b0 = 2 tokens (adv -1)
    logits, tokens = _logits(5, n=8)
    lens, tids, advs = [4, 2, 2], ["a", "a", "b"], [1.0, 1.0, -1.0]
    adv = torch.tensor(
        [a for a, n in zip(advs, lens, strict=True) for _ in range(n)], dtype=torch.float64
    )
    weights = sample_token_weights(aggregation, lens, tids)
    token_w = torch.tensor(
        [w for w, n in zip(weights, lens, strict=True) for _ in range(n)], dtype=torch.float64
    )
    logp = _token_logp(logits, tokens)
    terms = policy_loss(
        logp,
        logp.detach(),
        logp.detach(),
        adv,
        NO_KL,
        normalizer=float(token_w.sum()),
        token_weights=token_w,
    )
    lp = _token_logp(logits, tokens)
    a0, a1, b0 = -lp[:4], -lp[4:6], lp[6:]  # -A * ratio, ratio = 1 at the proximal policy
    expected = {
        "token": (a0.sum() + a1.sum() + b0.sum()) / 8,
        "step": (a0.mean() + a1.mean() + b0.mean()) / 3,
        "trajectory": ((a0.mean() + a1.mean()) / 2 + b0.mean()) / 2,
    }[aggregation]
    torch.testing.assert_close(_grad(terms.loss, logits), _grad(expected, logits))
