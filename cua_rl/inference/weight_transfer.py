"""Moving weights from a learner to one inference replica over a collective.

A two-party gloo group, on CPU and GPU alike (the vLLM worker extension also has
an NCCL receiver, which nothing calls), is built from a TCPStore the learner
hosts, without touching torch.distributed's global default group, so a learner
that is itself part of a training group can open one link per replica, one
replica at a time. The learner is rank 0 and broadcasts the manifest's tensors
in order; the replica receives them into fresh buffers and swaps them in only
when all have arrived, so no request ever sees a half-updated model.

Buckets: consecutive tensors of one dtype travel together as one flat buffer of
at most `bucket_bytes` (one broadcast each; a tensor larger than that is a
bucket of its own and is sent as it is), so small tensors (norms, biases) do not
cost a collective each: Qwen3-VL-8B's 750 tensors take 480 broadcasts at 8 MiB;
`cua-rl bench weight-sync` measures what that buys. The layout (`bucket_layout`)
is a pure function of the manifest and `bucket_bytes`, both of which the update
request carries, so the two sides always cut the stream the same way; a request
without `bucket_bytes` means 0: one tensor per broadcast, the protocol before
buckets. The receiver's tensors are views into its bucket buffers (fresh ones,
as before); nothing is swapped in until every bucket has arrived. The vLLM side
(vllm_side/cua_rl_vllm.py) repeats `bucket_layout`, since it cannot import this
module; a unit test holds the two copies equal.

The receiver sets `JOINED_KEY` in the store as soon as it connects, and the
learner waits for that key in short steps before it builds the group: a replica
that never comes (it died or hung before joining) is given up when its update
request fails, instead of holding the learner's store and sender thread for the
link's whole timeout. The store lives only as long as the sender holds it
(TCPStore has no close; learner/weight_sync.py drops its last reference).
"""

from __future__ import annotations

import math
import socket
import threading
import time
from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

STORE_PREFIX = "cua-rl-weights"
JOINED_KEY = f"{STORE_PREFIX}/joined"
ABANDONED_KEY = f"{STORE_PREFIX}/abandoned"
"""Set by the store's host when it gives the link up: a sender in another process (a
learner's rank 0) waiting for the receiver stops (`LinkAbandoned`)."""
"""Set by the receiver on connecting (the vLLM side sets the same key)."""
_PEER_POLL_S = 0.2
_DTYPES = {
    str(t).removeprefix("torch."): t
    for t in (torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64)
}
_ITEM_BYTES = {name: dtype.itemsize for name, dtype in _DTYPES.items()}
MIB = 1 << 20


def manifest(named: Iterable[tuple[str, torch.Tensor]]) -> list[dict[str, Any]]:
    """Names, shapes and dtypes the receiver allocates before the transfer."""
    return [
        {"name": n, "shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch.")}
        for n, t in named
    ]


def open_link(
    host: str,
    port: int,
    rank: int,
    timeout_s: float = 300.0,
    store: dist.TCPStore | None = None,
    abandoned: threading.Event | None = None,
) -> dist.ProcessGroup:
    """The two-party gloo group; rank 0 (the learner) passes the store it hosts and may
    pass `abandoned`, which ends its wait for the receiver early (`LinkAbandoned`)."""
    timeout = timedelta(seconds=timeout_s)
    if store is None:
        store = dist.TCPStore(host, port, world_size=2, is_master=False, timeout=timeout)
        store.set(JOINED_KEY, "1")
    else:
        wait_for_peer(store, timeout_s, abandoned)
    return dist.ProcessGroupGloo(dist.PrefixStore(STORE_PREFIX, store), rank, 2, timeout)


def join_as_sender(host: str, port: int, timeout_s: float = 300.0) -> dist.ProcessGroup:
    """The two-party group as its rank 0, from a store someone else hosts (the driver):
    a learner's rank 0 sending its gathered weights straight to a replica. Waits for
    the receiver as the host's own sender does, and stops when the host sets
    `ABANDONED_KEY`."""
    timeout = timedelta(seconds=timeout_s)
    store = dist.TCPStore(host, port, world_size=2, is_master=False, timeout=timeout)
    wait_for_peer(store, timeout_s)
    return dist.ProcessGroupGloo(dist.PrefixStore(STORE_PREFIX, store), 0, 2, timeout)


class LinkAbandoned(RuntimeError):
    """The sender stopped waiting for a receiver that will not come."""


def wait_for_peer(
    store: dist.TCPStore, timeout_s: float, abandoned: threading.Event | None = None
) -> None:
    """Block until the receiver has connected to `store`, `abandoned` is set
    (`LinkAbandoned`) or `timeout_s` passes (`TimeoutError`)."""
    deadline = time.monotonic() + timeout_s
    abandoned = abandoned or threading.Event()
    while not store.check([JOINED_KEY]):
        if abandoned.wait(_PEER_POLL_S) or store.check([ABANDONED_KEY]):
            raise LinkAbandoned("the weight link was abandoned before the receiver joined")
        if time.monotonic() >= deadline:
            raise TimeoutError(f"no receiver joined the weight link within {timeout_s:.0f} s")


def host_store(host: str, port: int, timeout_s: float = 300.0) -> dist.TCPStore:
    """The learner's store, listening on `host` only: torch's own listener binds every
    interface, which would put the link on every network the learner's host is on."""
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    listener = socket.create_server((host, port), family=family, backlog=128)
    try:
        store = dist.TCPStore(
            host,
            listener.getsockname()[1],
            world_size=2,
            is_master=True,
            timeout=timedelta(seconds=timeout_s),
            wait_for_workers=False,
            master_listen_fd=listener.fileno(),
        )
    except BaseException:
        listener.close()
        raise
    listener.detach()  # the store owns the descriptor now (it closes it when it ends)
    return store


def bucket_layout(items: Sequence[dict[str, Any]], bucket_bytes: int) -> list[tuple[int, int]]:
    """The buckets of a manifest as (start, stop) index ranges, in order.

    Consecutive tensors of one dtype share a bucket while its size stays within
    `bucket_bytes`; a tensor larger than that is a bucket of its own; `bucket_bytes`
    0 puts every tensor in its own bucket (the protocol before buckets). Raises
    ValueError naming the entry whose dtype or shape is not one the link carries."""
    if bucket_bytes <= 0:
        sizes = [_entry_bytes(item) for item in items]  # validates every entry
        return [(i, i + 1) for i in range(len(sizes))]
    buckets: list[tuple[int, int]] = []
    start, filled = 0, 0
    for i, item in enumerate(items):
        size = _entry_bytes(item)
        if i > start and (item["dtype"] != items[start]["dtype"] or filled + size > bucket_bytes):
            buckets.append((start, i))
            start, filled = i, 0
        filled += size
    if items:
        buckets.append((start, len(items)))
    return buckets


def _entry_bytes(item: Any) -> int:
    if not isinstance(item, dict) or not isinstance(item.get("name"), str):
        raise ValueError(f"manifest entry {str(item)[:200]}: expected {{name, shape, dtype}}")
    shape = item.get("shape")
    if item.get("dtype") not in _ITEM_BYTES:
        raise ValueError(
            f"tensor {item.get('name')}: unsupported dtype {item.get('dtype')!r} "
            f"(expected one of {sorted(_ITEM_BYTES)})"
        )
    if not isinstance(shape, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
    ):
        raise ValueError(
            f"tensor {item.get('name')}: shape {shape!r} is not a list of non-negative integers"
        )
    return math.prod(shape) * _ITEM_BYTES[item["dtype"]]


def send(
    group: dist.ProcessGroup, tensors: Iterable[torch.Tensor], bucket_bytes: int = 0
) -> list[float]:
    """Broadcast `tensors` in the buckets `bucket_layout` cuts from their manifest;
    returns each bucket's seconds (its packing and broadcast)."""
    tensors = list(tensors)
    layout = bucket_layout(manifest((str(i), t) for i, t in enumerate(tensors)), bucket_bytes)
    opts = dist.BroadcastOptions()
    opts.rootRank = 0
    staging: dict[torch.dtype, torch.Tensor] = {}
    seconds = []
    for start, stop in layout:
        began = time.perf_counter()
        group.broadcast([_packed(tensors[start:stop], staging)], opts).wait()
        seconds.append(time.perf_counter() - began)
    return seconds


def _packed(tensors: list[torch.Tensor], staging: dict[torch.dtype, torch.Tensor]) -> torch.Tensor:
    """One flat host tensor holding `tensors` back to back: a lone contiguous host
    tensor as it is, several copied into a staging buffer reused for every bucket of
    the sync (one bucket's worth per dtype: fresh memory per bucket costs the page
    faults of a whole model's copy)."""
    if len(tensors) == 1:
        return tensors[0].detach().contiguous().cpu().reshape(-1)
    dtype = tensors[0].dtype
    total = sum(t.numel() for t in tensors)
    if dtype not in staging or staging[dtype].numel() < total:
        staging[dtype] = torch.empty(total, dtype=dtype)
    flat = staging[dtype][:total]
    offset = 0
    for tensor in tensors:
        flat[offset : offset + tensor.numel()].copy_(tensor.detach().reshape(-1))
        offset += tensor.numel()
    return flat


def receive(
    group: dist.ProcessGroup, items: list[dict[str, Any]], bucket_bytes: int = 0
) -> dict[str, torch.Tensor]:
    """Receive the manifest's tensors (cut as the sender cut them) into fresh
    buffers; raises ValueError before receiving anything if an entry is bad."""
    layout = bucket_layout(items, bucket_bytes)
    opts = dist.BroadcastOptions()
    opts.rootRank = 0
    out: dict[str, torch.Tensor] = {}
    for start, stop in layout:
        bucket = items[start:stop]
        sizes = [math.prod(item["shape"]) for item in bucket]
        flat = torch.empty(sum(sizes), dtype=_DTYPES[bucket[0]["dtype"]])
        group.broadcast([flat], opts).wait()
        offset = 0
        for item, size in zip(bucket, sizes, strict=True):
            out[item["name"]] = flat[offset : offset + size].view(item["shape"])
            offset += size
    return out
