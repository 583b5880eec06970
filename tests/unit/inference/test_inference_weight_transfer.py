import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

from cua_rl.inference import weight_transfer as wt


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _weights() -> dict[str, torch.Tensor]:
    """A few MB of every dtype the link carries, in an order that changes dtype, with a
    scalar, an empty tensor, a non-contiguous one and some larger than a 1 MiB bucket."""
    g = torch.Generator().manual_seed(45)
    return {
        "embed.weight": torch.randn(512, 1024, generator=g),  # 2 MiB
        "layer.q.weight": torch.randn(64, 64, generator=g),
        "layer.k.weight": torch.randn(300, 128, generator=g).t(),  # non-contiguous
        "layer.norm.weight": torch.randn(64, generator=g),
        "layer.scale": torch.tensor(0.5, dtype=torch.float32),
        "layer.empty": torch.empty(0, 7),
        "vision.proj.weight": torch.randn(1024, 700, generator=g).to(torch.bfloat16),
        "vision.proj.bias": torch.randn(700, generator=g).to(torch.bfloat16),
        "vision.half": torch.randn(33, 17, generator=g).to(torch.float16),
        "counter": torch.arange(9, dtype=torch.int64),
        "head.double": torch.randn(5, 3, generator=g, dtype=torch.float64),
        "head.weight": torch.randn(1000, 300, generator=g),
    }


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    return (
        a.dtype == b.dtype
        and a.shape == b.shape
        and torch.equal(
            a.contiguous().reshape(-1).view(torch.uint8),
            b.contiguous().reshape(-1).view(torch.uint8),
        )
    )


@pytest.mark.parametrize("bucket_bytes", [0, wt.MIB])
def test_tensors_arrive_bit_exact_over_a_two_party_gloo_link(bucket_bytes: int) -> None:
    tensors = _weights()
    items = wt.manifest(tensors.items())
    port = _port()
    store = wt.host_store("127.0.0.1", port)
    received: dict[str, torch.Tensor] = {}

    def replica() -> None:
        group = wt.open_link("127.0.0.1", port, rank=1, timeout_s=30)
        received.update(wt.receive(group, items, bucket_bytes))

    thread = threading.Thread(target=replica)
    thread.start()
    seconds = wt.send(
        wt.open_link("127.0.0.1", port, rank=0, timeout_s=30, store=store),
        tensors.values(),
        bucket_bytes,
    )
    thread.join(30)
    assert len(seconds) == len(wt.bucket_layout(items, bucket_bytes))
    assert len(seconds) == (len(tensors) if bucket_bytes == 0 else 8)
    assert list(received) == list(tensors)
    for name, tensor in tensors.items():
        assert _same_bits(received[name], tensor), name


@pytest.mark.parametrize("receiver", ["hf", "vllm"])
def test_a_receiver_in_another_process_gets_every_tensor_bit_for_bit(
    receiver: str, tmp_path: Path
) -> None:
    """Both receivers (the hf server's, the vLLM side's) in a process of their own, one
    transfer without buckets and one with, each compared tensor by tensor."""
    tensors = _weights()
    items = wt.manifest(tensors.items())
    sizes = [0, wt.MIB]
    stores = [wt.host_store("127.0.0.1", 0, timeout_s=60) for _ in sizes]
    jobs = [
        {
            "host": "127.0.0.1",
            "port": s.port,
            "manifest": items,
            "bucket_bytes": b,
            "out": str(tmp_path / f"received-{b}.pt"),
        }
        for s, b in zip(stores, sizes, strict=True)
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.Popen(
        [sys.executable, "-m", "tests_support.weight_receiver", receiver],
        stdin=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        child.stdin.write("".join(json.dumps(job) + "\n" for job in jobs))
        child.stdin.close()
        for store, size in zip(stores, sizes, strict=True):
            wt.send(
                wt.open_link(
                    "127.0.0.1",
                    store.port,
                    rank=0,
                    timeout_s=60,
                    store=store,
                    abandoned=threading.Event(),
                ),
                tensors.values(),
                size,
            )
        assert child.wait(60) == 0
    finally:
        child.kill()
    for job in jobs:
        received = torch.load(job["out"])
        assert list(received) == list(tensors), job["bucket_bytes"]
        for name, tensor in tensors.items():
            assert _same_bits(received[name], tensor), (name, job["bucket_bytes"])


def test_the_sender_gives_up_on_a_receiver_that_never_joins_when_abandoned() -> None:
    store = wt.host_store("127.0.0.1", 0, timeout_s=600)
    abandoned = threading.Event()
    errors: list[BaseException] = []

    def sender() -> None:
        try:
            wt.open_link(
                "127.0.0.1", store.port, rank=0, timeout_s=600, store=store, abandoned=abandoned
            )
        except BaseException as exc:  # noqa: BLE001 - recorded for the assertion
            errors.append(exc)

    thread = threading.Thread(target=sender, daemon=True)
    thread.start()
    thread.join(0.5)
    assert thread.is_alive()  # still waiting for the receiver, not failed
    abandoned.set()
    thread.join(10)  # the link's own timeout is 600 s
    assert not thread.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], wt.LinkAbandoned)


def test_waiting_for_a_receiver_ends_at_the_link_timeout() -> None:
    store = wt.host_store("127.0.0.1", 0, timeout_s=30)
    with pytest.raises(TimeoutError, match="no receiver joined"):
        wt.wait_for_peer(store, timeout_s=0.5)


def test_the_vllm_side_receiver_joins_the_learners_link() -> None:
    import sys

    from cua_rl.inference.vllm_engine import SIDE_DIR

    sys.path.insert(0, str(SIDE_DIR))
    try:
        import cua_rl_vllm as side
    finally:
        sys.path.remove(str(SIDE_DIR))
    assert side.STORE_PREFIX == wt.STORE_PREFIX
    tensors = {"w": torch.randn(5, 2)}
    store = wt.host_store("127.0.0.1", 0, timeout_s=30)
    received: list[tuple[str, torch.Tensor]] = []
    thread = threading.Thread(
        target=lambda: received.extend(
            side.receive_tensors(
                "127.0.0.1", store.port, wt.manifest(tensors.items()), timeout_s=30
            )
        )
    )
    thread.start()
    wt.send(
        wt.open_link(
            "127.0.0.1", store.port, rank=0, timeout_s=30, store=store, abandoned=threading.Event()
        ),
        tensors.values(),
    )
    thread.join(30)
    assert [n for n, _ in received] == ["w"] and torch.equal(received[0][1], tensors["w"])


def test_the_learners_store_listens_on_the_given_address_only() -> None:
    import os

    import psutil

    store = wt.host_store("127.0.0.1", 0, timeout_s=30)
    listening = {
        c.laddr
        for c in psutil.Process(os.getpid()).net_connections("tcp")
        if c.status == psutil.CONN_LISTEN and c.laddr.port == store.port
    }
    assert listening == {("127.0.0.1", store.port)}, listening  # not 0.0.0.0 or ::
