import socket
import threading

import pytest
import torch

from cua_rl.inference import weight_transfer as wt


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_tensors_arrive_bit_exact_over_a_two_party_gloo_link() -> None:
    tensors = {"a.weight": torch.randn(3, 4), "b.bias": torch.randn(7).to(torch.bfloat16)}
    items = wt.manifest(tensors.items())
    port = _port()
    store = wt.host_store("127.0.0.1", port)
    received: dict[str, torch.Tensor] = {}

    def replica() -> None:
        group = wt.open_link("127.0.0.1", port, rank=1, timeout_s=30)
        received.update(wt.receive(group, items))

    thread = threading.Thread(target=replica)
    thread.start()
    wt.send(wt.open_link("127.0.0.1", port, rank=0, timeout_s=30, store=store), tensors.values())
    thread.join(30)
    assert set(received) == set(tensors)
    for name, tensor in tensors.items():
        assert received[name].dtype == tensor.dtype and torch.equal(received[name], tensor)


def test_the_sender_gives_up_on_a_receiver_that_never_joins_when_abandoned() -> None:
    store = wt.host_store("127.0.0.1", 0, timeout_s=600)
    abandoned = threading.Event()
    errors: list[BaseException] = []

    def sender() -> None:
        try:
            wt.open_link("127.0.0.1", store.port, rank=0, timeout_s=600, store=store,
                         abandoned=abandoned)
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
    thread = threading.Thread(target=lambda: received.extend(side.receive_tensors(
        "127.0.0.1", store.port, wt.manifest(tensors.items()), timeout_s=30)))
    thread.start()
    wt.send(wt.open_link("127.0.0.1", store.port, rank=0, timeout_s=30, store=store,
                         abandoned=threading.Event()), tensors.values())
    thread.join(30)
    assert [n for n, _ in received] == ["w"] and torch.equal(received[0][1], tensors["w"])


def test_the_learners_store_listens_on_the_given_address_only() -> None:
    import os

    import psutil

    store = wt.host_store("127.0.0.1", 0, timeout_s=30)
    listening = {c.laddr for c in psutil.Process(os.getpid()).net_connections("tcp")
                 if c.status == psutil.CONN_LISTEN and c.laddr.port == store.port}
    assert listening == {("127.0.0.1", store.port)}, listening  # not 0.0.0.0 or ::
