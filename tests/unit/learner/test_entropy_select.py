"""Choosing the high-entropy steps of an update: rounding, ties, aggregation weights, and
one choice over all ranks (two real gloo processes gather through the learner's
`dist_all_reduce`)."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Literal

import pytest

from cua_rl.learner.entropy_select import (
    SampleRow,
    gather_rows,
    selected_count,
    selected_weights,
    top_fraction,
    trajectory_key,
)


def _rows(entropies: list[float], start: int = 0, mini_batch: int = 0) -> list[SampleRow]:
    return [
        SampleRow(e, start + i, mini_batch, 4 + i, trajectory_key(f"t{(start + i) % 3}"))
        for i, e in enumerate(entropies)
    ]


@pytest.mark.parametrize(
    ("fraction", "n", "k"),
    [
        (0.3, 10, 3),  # 0.3 x 10 is 3.0000000000000004 in floats: still 3
        (0.25, 10, 3),  # 2.5 rounds up
        (0.01, 5, 1),  # at least one step trains
        (1.0, 7, 7),
        (0.5, 0, 0),
    ],
)
def test_ceil_of_f_times_n_and_at_least_one(fraction: float, n: int, k: int) -> None:
    assert selected_count(fraction, n) == k


def test_the_highest_entropies_train_and_ties_go_to_the_earlier_sample() -> None:
    rows = _rows([0.5, 2.0, 1.0, 2.0, 1.0, 0.1])
    assert top_fraction(rows, 0.5) == [False, True, True, True, False, False]
    # The tie-break is the position in the update, not the row's place in the table.
    swapped = [rows[4], rows[1], rows[2], rows[3], rows[0], rows[5]]
    assert [r.index for r, c in zip(swapped, top_fraction(swapped, 0.5), strict=True) if c] == [
        1,
        2,
        3,
    ]


def test_weights_are_recomputed_over_the_chosen_steps_of_each_mini_batch() -> None:
    # Mini-batch 0: trajectory a has steps 0 and 1, b has step 2; step 1 is not chosen.
    a, b = trajectory_key("a"), trajectory_key("b")
    rows = [
        SampleRow(3.0, 0, 0, 4, a),
        SampleRow(0.1, 1, 0, 5, a),
        SampleRow(2.0, 2, 0, 2, b),
        SampleRow(0.2, 3, 1, 3, b),
    ]
    chosen = [True, False, True, False]
    weights, sizes = selected_weights(rows, chosen, "trajectory", 2)
    # a keeps one chosen step, so it weighs 1/(4 x 1), not 1/(4 x 2); mini-batch 1 has none.
    assert weights == [1 / 4, 0.0, 1 / 2, 0.0] and sizes == [2.0, 0.0]
    weights, sizes = selected_weights(rows, chosen, "token", 2)
    assert weights == [1.0, 0.0, 1.0, 0.0] and sizes == [6.0, 0.0]
    weights, sizes = selected_weights(rows, chosen, "step", 2)
    assert weights == [1 / 4, 0.0, 1 / 2, 0.0] and sizes == [2.0, 0.0]


@dataclass
class _Group:
    """A rank of a plain torch.distributed group, reducing as the learner's ranks do."""

    rank: int
    world_size: int

    def all_reduce(self, values: list[float], op: Literal["sum", "max"]) -> list[float]:
        from cua_rl.learner.collectives import dist_all_reduce

        return dist_all_reduce(values, op)


RANK_ROWS = {0: _rows([0.1, 0.3, 0.2, 0.4], start=0), 1: _rows([0.9, 0.8], start=4)}
"""Rank 0 holds the update's low-entropy steps: a per-rank threshold would train two of
them, the global one trains none."""


def _rank(rank: int, port: int, out: object) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        table, offset = gather_rows(_Group(rank, 2), RANK_ROWS[rank])
        out.put((rank, table, offset, top_fraction(table, 0.5)))  # type: ignore[attr-defined]
    finally:
        dist.destroy_process_group()


def test_the_choice_is_one_over_all_ranks() -> None:
    mp = pytest.importorskip("torch.multiprocessing")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("fork")  # no re-import of torch in the children
    out = ctx.Queue()
    procs = [ctx.Process(target=_rank, args=(r, port, out)) for r in range(2)]
    for p in procs:
        p.start()
    results = sorted(out.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    everything = RANK_ROWS[0] + RANK_ROWS[1]
    for rank, table, offset, chosen in results:
        assert table == everything and offset == (0, 4)[rank]
        # ceil(0.5 x 6) = 3: both of rank 1's steps and rank 0's highest.
        assert [r.index for r, c in zip(table, chosen, strict=True) if c] == [3, 4, 5]
