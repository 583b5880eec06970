"""Splitting one update over the ranks of a learner, deterministically, by tokens.

The learner service hands the rank group one batch (an update); this module
decides which rank trains which sample. Invariants:
- the mini-batches are the ones a single process would make (contiguous,
  near-equal index ranges of the batch, `step._split`), and each sample's
  aggregation weight is computed over its whole mini-batch, so N ranks take the
  same optimizer steps on the same loss as one process (up to float sums);
- within each mini-batch, samples go longest first to the rank with the fewest
  tokens of that mini-batch so far (ties: fewest tokens of the update, then the
  lower rank): list scheduling, so every rank's tokens of a mini-batch are within
  one sample's length of an equal split (with one mini-batch per update, the
  default, the same holds for the update; a sample longer than
  `micro_batch_tokens` is a micro-batch of its own, so "one micro-batch");
- the same batch and lengths always give the same shares (no randomness);
- every rank gets a share: one with no sample gets a `filler` sample it runs with
  a zero loss weight, since every rank must take part in every collective.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cua_rl.types import StepSample


@dataclass(frozen=True, slots=True)
class RankShare:
    """One rank's part of one update (what crosses to a rank process or actor)."""

    mini_batches: tuple[tuple[StepSample, ...], ...]
    """This rank's samples of each mini-batch of the update (some may be empty)."""
    weights: tuple[tuple[float, ...], ...]
    """Aggregation weight of each of those samples' tokens (`loss.sample_token_weights`
    over the whole mini-batch, not this rank's part of it)."""
    tokens: int
    """Prompt plus response tokens of this share (what the split balances)."""
    filler: StepSample | None = None
    """A sample run with weight 0 by a rank that has none of its own."""
    indices: tuple[tuple[int, ...], ...] = ()
    """Position in the update of each of those samples (empty: unknown, as for a rank
    handed its own samples); entropy selection breaks ties by it, so its choice does
    not depend on the split."""

    @property
    def samples(self) -> int:
        return sum(len(mb) for mb in self.mini_batches)


def contiguous_chunks(n: int, parts: int) -> list[list[int]]:
    """`parts` contiguous, near-equal index ranges (some empty when n < parts)."""
    bounds = [n * i // parts for i in range(parts + 1)]
    return [list(range(bounds[i], bounds[i + 1])) for i in range(parts)]


def split_update(
    samples: Sequence[StepSample],
    lengths: Sequence[int],
    ranks: int,
    mini_batches: int,
    aggregation: str,
) -> list[RankShare]:
    """The shares of `ranks` ranks; `lengths[i]` is sample i's prompt + response tokens."""
    from cua_rl.learner.loss import sample_token_weights

    if len(lengths) != len(samples):
        raise ValueError(f"{len(samples)} samples but {len(lengths)} lengths")
    if not samples:
        raise ValueError("an update needs at least one sample")
    totals = [0] * ranks
    parts: list[list[list[int]]] = [[] for _ in range(ranks)]
    weight_of: dict[int, float] = {}
    for chunk in contiguous_chunks(len(samples), mini_batches):
        weights = sample_token_weights(
            aggregation,
            [len(samples[i].response_token_ids) for i in chunk],
            [samples[i].trajectory_id for i in chunk],
        )
        weight_of.update(zip(chunk, weights, strict=True))
        loads = [0] * ranks
        chosen: list[list[int]] = [[] for _ in range(ranks)]
        for i in sorted(chunk, key=lambda i: (-lengths[i], i)):
            r = min(range(ranks), key=lambda r: (loads[r], totals[r], r))
            chosen[r].append(i)
            loads[r] += lengths[i]
            totals[r] += lengths[i]
        for r in range(ranks):
            parts[r].append(sorted(chosen[r]))  # batch order within a rank
    return [
        RankShare(
            mini_batches=tuple(tuple(samples[i] for i in mb) for mb in parts[r]),
            weights=tuple(tuple(weight_of[i] for i in mb) for mb in parts[r]),
            tokens=totals[r],
            filler=samples[0] if not any(parts[r]) else None,
            indices=tuple(tuple(mb) for mb in parts[r]),
        )
        for r in range(ranks)
    ]


def single_share(samples: Sequence[StepSample], mini_batches: int, aggregation: str) -> RankShare:
    """The whole update as one rank's share (in-process engines, and a rank that was
    given its own samples, as a hand-started DeepSpeed rank is)."""
    return split_update(samples, [0] * len(samples), 1, mini_batches, aggregation)[0]
