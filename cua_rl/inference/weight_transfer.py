"""Moving weights from a learner to one inference replica over a collective.

A two-party gloo group (NCCL on GPU in the vLLM worker extension) is built from
a TCPStore the learner hosts, without touching torch.distributed's global
default group, so a learner that is itself part of a training group can open
one link per replica, one replica at a time. The learner is rank 0 and
broadcasts every tensor of the manifest in order; the replica receives them
into fresh buffers and swaps them in only when all have arrived, so no request
ever sees a half-updated model.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

_DTYPES = {str(t).removeprefix("torch."): t for t in
           (torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64)}


def manifest(named: Iterable[tuple[str, torch.Tensor]]) -> list[dict[str, Any]]:
    """Names, shapes and dtypes the receiver allocates before the transfer."""
    return [{"name": n, "shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch.")}
            for n, t in named]


def open_link(host: str, port: int, rank: int, timeout_s: float = 300.0,
              store: dist.TCPStore | None = None) -> dist.ProcessGroup:
    """The two-party gloo group; rank 0 (the learner) passes the store it hosts."""
    timeout = timedelta(seconds=timeout_s)
    if store is None:
        store = dist.TCPStore(host, port, world_size=2, is_master=False, timeout=timeout)
    return dist.ProcessGroupGloo(dist.PrefixStore("cua-rl-weights", store), rank, 2, timeout)


def host_store(host: str, port: int, timeout_s: float = 300.0) -> dist.TCPStore:
    return dist.TCPStore(host, port, world_size=2, is_master=True,
                         timeout=timedelta(seconds=timeout_s), wait_for_workers=False)


def send(group: dist.ProcessGroup, tensors: Iterable[torch.Tensor]) -> None:
    opts = dist.BroadcastOptions()
    opts.rootRank = 0
    for tensor in tensors:
        group.broadcast([tensor.detach().contiguous().cpu()], opts).wait()


def receive(group: dist.ProcessGroup, items: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    opts = dist.BroadcastOptions()
    opts.rootRank = 0
    out: dict[str, torch.Tensor] = {}
    for item in items:
        dtype = _DTYPES.get(item["dtype"])
        if dtype is None:
            raise ValueError(f"tensor {item['name']}: unsupported dtype {item['dtype']!r}")
        buffer = torch.empty(item["shape"], dtype=dtype)
        group.broadcast([buffer], opts).wait()
        out[item["name"]] = buffer
    return out
