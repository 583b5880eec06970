"""The one collective the shared step uses across a learner's DeepSpeed ranks.

Kept apart from the engine so it can be exercised by a plain torch.distributed group
(two gloo processes, no model): the entropy selection's all-rank gather rides on it.
"""

from __future__ import annotations

from typing import Literal


def dist_all_reduce(values: list[float], op: Literal["sum", "max"]) -> list[float]:
    """Reduce a list of floats over the default process group, in float64 (exact for
    counts, and a sum of one value and zeros is that value)."""
    import torch
    import torch.distributed as dist

    tensor = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM if op == "sum" else dist.ReduceOp.MAX)
    return tensor.tolist()
