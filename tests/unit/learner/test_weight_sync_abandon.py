"""A collective weight sync to a replica that fails before joining the link lets go
of the link at once: the sender thread and its store do not wait out the link's
timeout, and the link's TCPStore (its server thread and sockets) ends with it rather
than at some later garbage collection (a soak showed both held for minutes after a
replica fault)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import threading
from pathlib import Path

import torch
from tests_support.fake_model_server import FakeModelConfig, FakeModelServer

from cua_rl.inference.replica_set import ReplicaSet
from cua_rl.learner.config import WeightSyncConfig
from cua_rl.learner.weight_sync import WeightSync

LINK_TIMEOUT_S = 600.0


class Source:
    def named_parameters(self):  # noqa: ANN201 - the shape a TrainEngine offers
        return iter([("w", torch.ones(4))])

    def export_weights(self, path: Path) -> Path:  # a catch-up's checkpoint (a dummy)
        path.mkdir(parents=True, exist_ok=True)
        (path / "config.json").write_text("{}")
        return path


def _senders() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("weight-send")]


def _store_threads() -> int:
    """Server threads of live TCPStores in this process (torch names them)."""
    count = 0
    for task in Path("/proc/self/task").iterdir():
        with contextlib.suppress(OSError):
            count += (task / "comm").read_text().startswith("pt_tcpstore")
    return count


@contextlib.contextmanager
def _no_garbage_collection():
    """A long-lived process runs a full collection rarely: what a cycle holds, stays."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


async def test_a_replica_that_fails_its_update_does_not_hold_the_sender(tmp_path: Path) -> None:
    server = FakeModelServer(FakeModelConfig(chat_s=0.01, update_s=0.2, update="refuse"))
    await server.start()
    replicas = ReplicaSet.from_urls([server.url], timeout_s=10.0)
    sync = WeightSync(
        replicas,
        WeightSyncConfig(mode="collective", timeout_s=LINK_TIMEOUT_S),
        tmp_path / "exports",
    )
    stores_before = _store_threads()
    try:
        with _no_garbage_collection():
            assert await sync.push(Source(), 1) == []  # the replica is out, not the sync
            assert not replicas.serving()
            for sender in _senders():  # the link's timeout is 600 s; giving up takes < 1 s
                await asyncio.to_thread(sender.join, 10.0)
            assert not _senders(), "the sender still waits for a replica that will not join"
            assert _store_threads() == stores_before, "the link's store outlived the sync"
    finally:
        await sync.close()
        await replicas.close()  # the test's set, not the sync's: its clients' sessions
        await server.stop()
