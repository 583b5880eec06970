import socket
import threading

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
