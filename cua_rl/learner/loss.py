"""The off-policy-corrected policy loss of both learners (DESIGN.md section 6).

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

`w` is a constant (no gradient). The normalizer is the number of response tokens
of the whole mini-batch (token mean), passed in so that micro-batches and ranks
add up to one token mean. GSPO replaces the token ratio by the sequence's
length-normalized ratio `exp(mean_t (logp - logp_prox))` (and the behavior weight
by its sequence analogue), clips it with its own range, and averages over
sequences: each token carries 1 / |y| and the normalizer counts sequences.
"""

from __future__ import annotations

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
) -> LossTerms:
    """The loss of one micro-batch; all tensors are flat (N,) over response tokens.

    `seq_index` (row of each token) is required for GSPO. `ref_logp` is required
    when `cfg.kl_beta > 0`.
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
    logp: torch.Tensor, prox_logp: torch.Tensor, behavior_logp: torch.Tensor,
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


def loss_normalizer(cfg: LossConfig, num_tokens: int, num_sequences: int) -> float:
    """What a mini-batch's summed loss is divided by: tokens (PPO) or sequences (GSPO)."""
    return float(num_sequences if cfg.kind == "gspo" else num_tokens)
