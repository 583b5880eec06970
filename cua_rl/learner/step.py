"""One `train_step`, shared by the engines: proximal pass, then mini-batch updates.

Order within a step: encode and pack every sample; compute the proximal
logprobs (current weights, no grad) and the reference logprobs of all of them
BEFORE any update, so every mini-batch is judged against the same proximal
policy; then for each mini-batch accumulate gradients over its micro-batches and
take one optimizer step.

Data parallel invariant: every rank runs the same number of forwards and
backwards (ZeRO-3 gathers parameters in each), so a rank with fewer micro-batches
repeats one with a zero loss weight; and each rank divides its summed loss by
the global token (or sequence) count times 1/world, so that DeepSpeed's gradient
averaging yields the exact global mean.

With `entropy_top_fraction` set, the proximal pass also measures each sample's
token entropy, and only the chosen high-entropy samples go on to the mini-batch
loop (entropy_units.py; the choice is global over the ranks).
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

import torch

from cua_rl.learner.batching import MicroBatch, TrainUnit, build_micro_batches, encode_sample
from cua_rl.learner.config import LearnerConfig
from cua_rl.learner.entropy_units import high_entropy_units
from cua_rl.learner.logprobs import batch_logprobs, batch_logprobs_entropy, response_logprobs
from cua_rl.learner.loss import policy_loss
from cua_rl.learner.rank_split import RankShare


class StepOps(Protocol):
    """What an engine provides to the shared step."""

    rank: int
    world_size: int

    def forward_model(self) -> Any:
        """The callable trained model (an HF model or a DeepSpeed engine)."""

    def backward(self, loss: torch.Tensor, boundary: bool) -> None:
        """Accumulate gradients; `boundary` marks a mini-batch's last micro-batch."""

    def optimizer_step(self) -> float:
        """Clip, step optimizer and scheduler, zero grads; return the grad norm."""

    def all_reduce(self, values: list[float], op: Literal["sum", "max"]) -> list[float]:
        """Reduce across data-parallel ranks (identity for one process)."""


def run_share_step(
    ops: StepOps,
    share: RankShare,
    *,
    processor: Any,
    reference: Any | None,
    cfg: LearnerConfig,
    device: torch.device | str,
) -> dict[str, float]:
    """Train on this rank's share of an update (rank_split.py made the mini-batches
    and the weights over the whole update)."""
    pad = processor.tokenizer.pad_token_id
    encoded = [[encode_sample(processor, s) for s in mb] for mb in share.mini_batches]
    plans = [
        build_micro_batches(enc, cfg.micro_batch_tokens, pad, weights) if enc else []
        for enc, weights in zip(encoded, share.weights, strict=True)
    ]
    targets = ops.all_reduce([float(len(p)) for p in plans], "max")
    # The mean's denominator over the whole mini-batch (all micro-batches and ranks).
    sizes = ops.all_reduce([sum(float(m.token_weights.sum()) for m in p) for p in plans], "sum")
    filler = next((m for p in plans for m in p), None)
    if filler is None:
        if share.filler is None:
            raise ValueError("train_step needs at least one sample on every rank")
        filler = build_micro_batches(
            [encode_sample(processor, share.filler)], cfg.micro_batch_tokens, pad, [0.0]
        )[0]
    # (micro-batch, weight): weight 0 marks a repeat that only keeps ranks in step.
    padded = [
        [(m, 1.0) for m in p] + [(p[0] if p else filler, 0.0)] * (int(t) - len(p))
        for p, t in zip(plans, targets, strict=True)
    ]
    flat = [m.to(device) for plan in padded for m, _ in plan]
    model = ops.forward_model()
    fraction = cfg.entropy_top_fraction
    if fraction is None:
        prox, entropy = batch_logprobs(model, flat, cfg.temperature), []
    else:
        prox, entropy = batch_logprobs_entropy(model, flat, cfg.temperature)
    use_ref = cfg.loss.kl_beta > 0
    ref = batch_logprobs(reference, flat, cfg.temperature) if use_ref else [None] * len(flat)
    units = _regroup(
        [
            TrainUnit(b, p, r, w)
            for b, p, r, (_, w) in zip(
                flat, prox, ref, (x for plan in padded for x in plan), strict=True
            )
        ],
        padded,
    )
    selection: dict[str, float] = {}
    if fraction is not None:
        units, sizes, selection = high_entropy_units(
            ops,
            share,
            encoded,
            units,
            _regroup(entropy, padded),
            fraction=fraction,
            aggregation=cfg.loss.aggregation,
            micro_batch_tokens=cfg.micro_batch_tokens,
            pad_token_id=pad,
            device=device,
        )

    sums: dict[str, float] = {}
    count = loss_total = grad_norm = 0.0
    for plan, size in zip(units, sizes, strict=True):
        for j, unit in enumerate(plan):
            mb: MicroBatch = unit.batch
            logp = response_logprobs(model, mb, cfg.temperature)
            terms = policy_loss(
                logp,
                unit.prox,
                mb.behavior_logprobs,
                mb.advantages,
                cfg.loss,
                normalizer=size / ops.world_size,
                ref_logp=unit.ref,
                seq_index=mb.seq_index,
                token_weights=mb.token_weights,
            )
            ops.backward(terms.loss * unit.weight, boundary=j == len(plan) - 1)
            if unit.weight:
                loss_total += float(terms.loss.detach())
                count += terms.count
                for key, value in terms.sums.items():
                    sums[key] = sums.get(key, 0.0) + value
        if plan:
            grad_norm = ops.optimizer_step()
    # The loss metric is the mean over the mini-batches that took an optimizer step
    # (with selection, one none of whose samples was chosen takes none).
    stepped = len(units) if fraction is None else max(1, sum(1 for plan in units if plan))
    return {
        **_metrics(
            ops, sums, count, loss_total, grad_norm, [e for enc in encoded for e in enc], stepped
        ),
        **selection,
    }


def _regroup(items: list[Any], padded: list[list[Any]]) -> list[list[Any]]:
    """A flat list cut back into the mini-batches of `padded`."""
    out, k = [], 0
    for plan in padded:
        out.append(items[k : k + len(plan)])
        k += len(plan)
    return out


def _metrics(
    ops: StepOps,
    sums: dict[str, float],
    count: float,
    loss_total: float,
    grad_norm: float,
    encoded: list[Any],
    mini_batches: int,
) -> dict[str, float]:
    keys = sorted(sums)
    tokens = float(sum(e.response_len for e in encoded))
    reduced = ops.all_reduce(
        [sums[k] for k in keys] + [count, loss_total, tokens, float(len(encoded))], "sum"
    )
    total = max(reduced[len(keys)], 1e-12)
    out = {k: v / total for k, v in zip(keys, reduced, strict=False)}
    out["loss"] = reduced[len(keys) + 1] / ops.world_size / mini_batches
    out["response_tokens"] = reduced[len(keys) + 2]
    out["samples"] = reduced[len(keys) + 3]
    out["grad_norm"] = grad_norm
    return out
