"""Which steps of an update train when only the high-entropy ones do (DART-GUI).

With `entropy_top_fraction: f`, the learner keeps the ceil(f x N) samples of an
update whose mean token entropy is highest. The choice must be the same on every
rank of a learner and must not depend on how the update was split over them, so:
- every rank describes its own samples in `SampleRow`s (entropy, position in the
  update, mini-batch, response length, trajectory) and `gather_rows` makes every
  rank hold all N rows, in rank order, through the one collective the learner
  already has (`all_reduce`: each rank writes its rows into its slots of a
  zero vector, and the sum is the gather; adding zeros is exact);
- `top_fraction` then picks the same rows on every rank: highest entropy first,
  ties to the earlier position in the update (then the earlier gathered row);
- `selected_weights` recomputes the loss aggregation weights over the selected
  rows of each mini-batch, so a mini-batch's loss is the mean over its selected
  samples, as if the others had never been in it.

No torch here: the rows are plain floats, so the choice can be checked with
simulated ranks.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

FIELDS = 5
"""Floats per row in the gathered vector."""
NO_TRAJECTORY = -1.0
"""Trajectory key of a sample without a trajectory id (it is its own trajectory)."""


class Reducer(Protocol):
    """The part of `step.StepOps` a gather needs."""

    rank: int
    world_size: int

    def all_reduce(self, values: list[float], op: Literal["sum", "max"]) -> list[float]:
        """Reduce across the learner's ranks (identity for one process)."""


@dataclass(frozen=True, slots=True)
class SampleRow:
    """One sample of the update, as every rank needs to see it to choose."""

    entropy: float
    """Mean token entropy over the sample's response tokens."""
    index: int
    """Its position in the update (the tie-break)."""
    mini_batch: int
    response_len: int
    trajectory: float
    """`trajectory_key` of its trajectory id (exact in a float64)."""


def trajectory_key(trajectory_id: str) -> float:
    """A 48-bit digest of a trajectory id, so rows can cross ranks as floats;
    `NO_TRAJECTORY` when there is none."""
    if not trajectory_id:
        return NO_TRAJECTORY
    return float(int.from_bytes(hashlib.sha256(trajectory_id.encode()).digest()[:6], "big"))


def gather_rows(ops: Reducer, rows: Sequence[SampleRow]) -> tuple[list[SampleRow], int]:
    """Every rank's rows, in rank order, on every rank; and where this rank's start."""
    counts = ops.all_reduce(
        [float(len(rows)) if r == ops.rank else 0.0 for r in range(ops.world_size)], "sum"
    )
    offset = int(sum(counts[: ops.rank]))
    total = int(sum(counts))
    flat = [0.0] * (total * FIELDS)
    for i, row in enumerate(rows):
        at = (offset + i) * FIELDS
        flat[at : at + FIELDS] = [
            row.entropy,
            float(row.index),
            float(row.mini_batch),
            float(row.response_len),
            row.trajectory,
        ]
    flat = ops.all_reduce(flat, "sum")
    out = [
        SampleRow(flat[i], int(flat[i + 1]), int(flat[i + 2]), int(flat[i + 3]), flat[i + 4])
        for i in range(0, total * FIELDS, FIELDS)
    ]
    return out, offset


def selected_count(fraction: float, n: int) -> int:
    """ceil(f x N), at least 1 and at most N; a product within 1e-9 of an integer
    is that integer (0.3 x 10 is 3, not 4)."""
    if n <= 0:
        return 0
    return min(n, max(1, math.ceil(fraction * n - 1e-9)))


def top_fraction(rows: Sequence[SampleRow], fraction: float) -> list[bool]:
    """Which rows train: the `selected_count` highest entropies; among equal
    entropies the earlier position in the update, then the earlier row."""
    order = sorted(range(len(rows)), key=lambda i: (-rows[i].entropy, rows[i].index, i))
    chosen = [False] * len(rows)
    for i in order[: selected_count(fraction, len(rows))]:
        chosen[i] = True
    return chosen


def selected_weights(
    rows: Sequence[SampleRow], chosen: Sequence[bool], aggregation: str, mini_batches: int
) -> tuple[list[float], list[float]]:
    """Each row's per-token aggregation weight (0 when not chosen) over the chosen
    rows of its mini-batch, and each mini-batch's normalizer (the sum of the weights
    over its tokens: tokens, samples or trajectories; 0 when none was chosen)."""
    from cua_rl.learner.loss import sample_token_weights

    weights = [0.0] * len(rows)
    sizes = [0.0] * mini_batches
    for m in range(mini_batches):
        members = [i for i, row in enumerate(rows) if row.mini_batch == m and chosen[i]]
        keys = [
            "" if rows[i].trajectory == NO_TRAJECTORY else repr(rows[i].trajectory) for i in members
        ]
        lens = [rows[i].response_len for i in members]
        for i, w in zip(members, sample_token_weights(aggregation, lens, keys), strict=True):
            weights[i] = w
            sizes[m] += w * rows[i].response_len
    return weights, sizes
