"""Moving weights from a learner to one inference replica over a collective.

A two-party gloo group (NCCL on GPU in the vLLM worker extension) is built from
a TCPStore the learner hosts, without touching torch.distributed's global
default group, so a learner that is itself part of a training group can open
one link per replica, one replica at a time. The learner is rank 0 and
broadcasts every tensor of the manifest in order; the replica receives them
into fresh buffers and swaps them in only when all have arrived, so no request
ever sees a half-updated model.

The receiver sets `JOINED_KEY` in the store as soon as it connects, and the
learner waits for that key in short steps before it builds the group: a replica
that never comes (it died or hung before joining) is given up when its update
request fails, instead of holding the learner's store and sender thread for the
link's whole timeout.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

STORE_PREFIX = "cua-rl-weights"
JOINED_KEY = f"{STORE_PREFIX}/joined"
"""Set by the receiver on connecting (the vLLM side sets the same key)."""
_PEER_POLL_S = 0.2
_DTYPES = {str(t).removeprefix("torch."): t for t in
           (torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64)}


def manifest(named: Iterable[tuple[str, torch.Tensor]]) -> list[dict[str, Any]]:
    """Names, shapes and dtypes the receiver allocates before the transfer."""
    return [{"name": n, "shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch.")}
            for n, t in named]


def open_link(host: str, port: int, rank: int, timeout_s: float = 300.0,
              store: dist.TCPStore | None = None,
              abandoned: threading.Event | None = None) -> dist.ProcessGroup:
    """The two-party gloo group; rank 0 (the learner) passes the store it hosts and may
    pass `abandoned`, which ends its wait for the receiver early (`LinkAbandoned`)."""
    timeout = timedelta(seconds=timeout_s)
    if store is None:
        store = dist.TCPStore(host, port, world_size=2, is_master=False, timeout=timeout)
        store.set(JOINED_KEY, "1")
    else:
        wait_for_peer(store, timeout_s, abandoned)
    return dist.ProcessGroupGloo(dist.PrefixStore(STORE_PREFIX, store), rank, 2, timeout)


class LinkAbandoned(RuntimeError):
    """The sender stopped waiting for a receiver that will not come."""


def wait_for_peer(store: dist.TCPStore, timeout_s: float,
                  abandoned: threading.Event | None = None) -> None:
    """Block until the receiver has connected to `store`, `abandoned` is set
    (`LinkAbandoned`) or `timeout_s` passes (`TimeoutError`)."""
    deadline = time.monotonic() + timeout_s
    abandoned = abandoned or threading.Event()
    while not store.check([JOINED_KEY]):
        if abandoned.wait(_PEER_POLL_S):
            raise LinkAbandoned("the weight link was abandoned before the receiver joined")
        if time.monotonic() >= deadline:
            raise TimeoutError(f"no receiver joined the weight link within {timeout_s:.0f} s")


def host_store(host: str, port: int, timeout_s: float = 300.0) -> dist.TCPStore:
    """The learner's store, listening on `host` only: torch's own listener binds every
    interface, which would put the link on every network the learner's host is on."""
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    listener = socket.create_server((host, port), family=family, backlog=128)
    try:
        store = dist.TCPStore(host, listener.getsockname()[1], world_size=2, is_master=True,
                              timeout=timedelta(seconds=timeout_s), wait_for_workers=False,
                              master_listen_fd=listener.fileno())
    except BaseException:
        listener.close()
        raise
    listener.detach()  # the store owns the descriptor now (it closes it when it ends)
    return store


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
