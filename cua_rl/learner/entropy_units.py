"""An update's training units cut down to its high-entropy steps (`entropy_top_fraction`).

The step's proximal pass already runs the model over every sample before any
update; with the switch on it also returns each token's entropy, and this module
turns that into what the mini-batch loop trains:
1. each local sample's mean token entropy, proximal and reference logprobs are
   cut out of the micro-batches they were packed in;
2. the rows of all ranks are gathered and the same samples chosen on every rank
   (`entropy_select`);
3. each rank repacks only its chosen samples (so an unchosen one costs no
   forward or backward with gradients), with aggregation weights recomputed over
   the chosen samples of each mini-batch, and pads to the group's micro-batch
   count with weight-0 repeats, as the step always does; a mini-batch none of
   whose samples was chosen, on any rank, has no unit and takes no optimizer step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from cua_rl.learner.batching import EncodedSample, TrainUnit, build_micro_batches
from cua_rl.learner.entropy_select import (
    Reducer,
    SampleRow,
    gather_rows,
    selected_weights,
    top_fraction,
    trajectory_key,
)
from cua_rl.learner.rank_split import RankShare

_Local = tuple[float, torch.Tensor, torch.Tensor | None]
"""A sample's mean entropy, proximal and reference logprobs."""


def high_entropy_units(
    ops: Reducer,
    share: RankShare,
    encoded: Sequence[Sequence[EncodedSample]],
    units: Sequence[Sequence[TrainUnit]],
    entropies: Sequence[Sequence[torch.Tensor]],
    *,
    fraction: float,
    aggregation: str,
    micro_batch_tokens: int,
    pad_token_id: int,
    device: torch.device | str,
) -> tuple[list[list[TrainUnit]], list[float], dict[str, float]]:
    """The units to train (per mini-batch), each mini-batch's loss normalizer over
    the whole group, and the selection's metrics (the same on every rank)."""
    local = _per_sample(encoded, units, entropies)
    keys = sorted(local)
    rows = [
        SampleRow(
            local[(m, i)][0],
            share.indices[m][i] if share.indices else n,
            m,
            encoded[m][i].response_len,
            trajectory_key(share.mini_batches[m][i].trajectory_id),
        )
        for n, (m, i) in enumerate(keys)
    ]
    table, offset = gather_rows(ops, rows)
    chosen = top_fraction(table, fraction)
    weights, sizes = selected_weights(table, chosen, aggregation, len(encoded))
    position = {key: offset + n for n, key in enumerate(keys)}
    plans: list[list[TrainUnit]] = []
    for m, samples in enumerate(encoded):
        keep = [i for i in range(len(samples)) if chosen[position[(m, i)]]]
        batches = build_micro_batches(
            [samples[i] for i in keep],
            micro_batch_tokens,
            pad_token_id,
            [weights[position[(m, i)]] for i in keep],
        )
        plans.append(
            [_unit(b.to(device), [local[(m, keep[j])] for j in b.sample_ids]) for b in batches]
            if keep
            else []
        )
    targets = ops.all_reduce([float(len(p)) for p in plans], "max")
    filler = next(u for plan in units for u in plan)
    padded = [
        p + [TrainUnit(filler.batch, filler.prox, filler.ref, 0.0)] * (int(t) - len(p))
        for p, t in zip(plans, targets, strict=True)
    ]
    return padded, sizes, _metrics(table, chosen)


def _per_sample(
    encoded: Sequence[Sequence[EncodedSample]],
    units: Sequence[Sequence[TrainUnit]],
    entropies: Sequence[Sequence[torch.Tensor]],
) -> dict[tuple[int, int], _Local]:
    """(mini-batch, sample) -> its mean entropy and its slices of the micro-batch's
    proximal and reference logprobs (tokens are flat row by row, `MicroBatch`)."""
    out: dict[tuple[int, int], _Local] = {}
    for m, (plan, ents) in enumerate(zip(units, entropies, strict=True)):
        for unit, ent in zip(plan, ents, strict=True):
            if not unit.weight:
                continue  # a repeat: its samples are another unit's
            lens = [encoded[m][i].response_len for i in unit.batch.sample_ids]
            refs = unit.ref.split(lens) if unit.ref is not None else [None] * len(lens)
            for i, e, p, r in zip(
                unit.batch.sample_ids, ent.split(lens), unit.prox.split(lens), refs, strict=True
            ):
                out[(m, i)] = (float(e.double().mean()), p, r)
    return out


def _unit(batch: Any, samples: Sequence[_Local]) -> TrainUnit:
    """A repacked micro-batch with its rows' proximal and reference logprobs."""
    ref = (
        torch.cat([r for _, _, r in samples])  # type: ignore[misc]  # all rows have a reference when the first has one
        if samples[0][2] is not None
        else None
    )
    return TrainUnit(batch, torch.cat([p for _, p, _ in samples]), ref, 1.0)


def _metrics(rows: Sequence[SampleRow], chosen: Sequence[bool]) -> dict[str, float]:
    kept = [r.entropy for r, c in zip(rows, chosen, strict=True) if c]
    return {
        "samples_trained": float(len(kept)),
        "samples_low_entropy": float(len(rows) - len(kept)),
        "entropy_threshold": min(kept),
        "step_entropy_mean": sum(r.entropy for r in rows) / len(rows),
        "step_entropy_mean_trained": sum(kept) / len(kept),
    }
