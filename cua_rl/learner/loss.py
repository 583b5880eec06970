"""The off-policy-corrected policy loss of both learners (docs/algorithms.md).

Three policies meet here: the behavior policy that sampled a token (the server's
weights, `logp_behavior`), the proximal policy (the learner's weights when the
batch started, `logp_prox`, detached) and the current policy being optimized
(`logp`). PPO's trust region is measured against the proximal policy, and the
staleness of the sample is corrected separately by the behavior importance
weight, so a stale sample neither breaks the clip nor gets an unbounded weight
(decoupled PPO, as in AReaL):

    ratio_t = exp(logp_t - logp_prox_t)
    w_t     = exp(logp_prox_t - logp_behavior_t)       truncated: min(w_t, C)
                                                       masked: w_t if w_t <= C else 0
    pg_t    = -w_t * min(ratio_t * A, clip(ratio_t, 1 - eps, 1 + eps) * A)
    kl_t    = exp(ref_t - logp_t) - (ref_t - logp_t) - 1   (k3, >= 0, zero at the reference)
    loss    = sum_t (pg_t + beta * kl_t) / normalizer

    loss    = sum_t a_t (pg_t + beta * kl_t) / sum_t a_t

`w` is a constant (no gradient). `a_t` is the aggregation weight of the token
(`sample_token_weights`): 1 (token mean), 1/|y| (step mean: each sample's tokens
averaged first) or 1/(|y| x steps of its trajectory in the mini-batch)
(trajectory mean). The normalizer `sum_t a_t` is taken over the whole mini-batch
and passed in, so that micro-batches and ranks add up to one mean. GSPO replaces
the token ratio by the sequence's length-normalized ratio
`exp(mean_t (logp - logp_prox))` (and the behavior weight by its sequence
analogue) and clips it with its own range.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from cua_rl.learner.config import LossConfig


@dataclass(frozen=True, slots=True)
class LossTerms:
    """A micro-batch's loss share and the sums its metrics are averaged from."""

    loss: torch.Tensor
    """Scalar, already divided by the normalizer: sum the shares, then backward."""
    sums: dict[str, float]
    """Per-token (or per-sequence for GSPO) sums; divide by `count` to average."""
    count: float


def policy_loss(
    logp: torch.Tensor,
    prox_logp: torch.Tensor,
    behavior_logp: torch.Tensor,
    advantages: torch.Tensor,
    cfg: LossConfig,
    normalizer: float,
    ref_logp: torch.Tensor | None = None,
    seq_index: torch.Tensor | None = None,
    token_weights: torch.Tensor | None = None,
) -> LossTerms:
    """The loss of one micro-batch; all tensors are flat (N,) over response tokens.

    `seq_index` (row of each token) is required for GSPO. `ref_logp` is required
    when `cfg.kl_beta > 0`. `token_weights` are the aggregation weights `a_t`
    (None: 1 per token for PPO, 1/|y| for GSPO).
    """
    prox_logp = prox_logp.detach()
    behavior_logp = behavior_logp.detach()
    if cfg.kind == "gspo":
        if seq_index is None:
            raise ValueError("GSPO needs seq_index to form sequence ratios")
        log_ratio, log_w, weight = _gspo_terms(logp, prox_logp, behavior_logp, seq_index)
        low, high = cfg.gspo_clip_low, cfg.gspo_clip_high
    else:
        log_ratio = logp - prox_logp
        log_w = prox_logp - behavior_logp
        weight = torch.ones_like(logp)
        low = high = cfg.clip_eps
    if token_weights is not None:
        weight = token_weights.to(logp.dtype)
    ratio = log_ratio.exp()
    raw_w = log_w.exp()
    over = raw_w > cfg.is_cap
    if cfg.is_mode == "mask":
        is_w = torch.where(over, torch.zeros_like(raw_w), raw_w)
    else:
        is_w = raw_w.clamp(max=cfg.is_cap)
    unclipped = ratio * advantages
    clipped = ratio.clamp(1.0 - low, 1.0 + high) * advantages
    pg = -is_w * torch.minimum(unclipped, clipped)
    # Clipping is active (no gradient) where the clipped branch is strictly smaller.
    clip_active = clipped < unclipped
    token_loss = pg
    kl = torch.zeros_like(logp)
    if cfg.kl_beta > 0:
        if ref_logp is None:
            raise ValueError("kl_beta > 0 needs reference logprobs")
        delta = ref_logp.detach() - logp
        kl = delta.exp() - delta - 1.0
        token_loss = token_loss + cfg.kl_beta * kl
    loss = (token_loss * weight).sum() / normalizer
    with torch.no_grad():
        count = float(weight.sum())
        sums = {
            "is_weight": float((is_w * weight).sum()),
            "is_weight_raw": float((raw_w * weight).sum()),
            "is_capped_frac": float((over.float() * weight).sum()),
            "clip_frac": float((clip_active.float() * weight).sum()),
            "ratio": float((ratio * weight).sum()),
            "kl": float((kl * weight).sum()),
            "pg_loss": float((pg * weight).sum()),
        }
    return LossTerms(loss, sums, count)


def _gspo_terms(
    logp: torch.Tensor,
    prox_logp: torch.Tensor,
    behavior_logp: torch.Tensor,
    seq_index: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-token copies of each sequence's mean log-ratio, mean log-weight and 1/|y|."""
    rows = int(seq_index.max()) + 1
    lengths = torch.zeros(rows, dtype=logp.dtype, device=logp.device)
    lengths.index_add_(0, seq_index, torch.ones_like(logp))

    def seq_mean(x: torch.Tensor) -> torch.Tensor:
        total = torch.zeros(rows, dtype=x.dtype, device=x.device).index_add(0, seq_index, x)
        return (total / lengths)[seq_index]

    return seq_mean(logp - prox_logp), seq_mean(prox_logp - behavior_logp), 1.0 / lengths[seq_index]


def sample_token_weights(
    aggregation: str, response_lens: Sequence[int], trajectory_ids: Sequence[str]
) -> list[float]:
    """The aggregation weight `a_t` carried by each token of each sample of one
    mini-batch; their sum over the mini-batch is the number of tokens, samples or
    trajectories. A sample without a trajectory id counts as its own trajectory."""
    if aggregation == "token":
        return [1.0] * len(response_lens)
    if aggregation == "step":
        return [1.0 / n for n in response_lens]
    if aggregation != "trajectory":
        raise ValueError(f"unknown loss aggregation {aggregation!r}")
    keys = [tid or f"#{i}" for i, tid in enumerate(trajectory_ids)]
    steps = Counter(keys)
    return [1.0 / (n * steps[k]) for n, k in zip(response_lens, keys, strict=True)]
