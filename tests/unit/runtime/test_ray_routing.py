"""Staggered weight sync under Ray: a fleet worker's copy of a pool routes around the
replica the driver has out of routing for its update, and back once it is done
(runtime/ray/routing.py), through the gate service as the real actors use it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from cua_rl.inference.replica_set import ReplicaSet, ReplicaState
from cua_rl.runtime.ray.routing import ROUTING_WITHHELD, following_withheld, publishing_withheld
from cua_rl.runtime.ray.services import GateService
from cua_rl.store.async_run_store import AsyncRunStore

URLS = ["http://127.0.0.1:1", "http://127.0.0.1:2"]


async def _until(check: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "not within the deadline"
        await asyncio.sleep(0.01)


async def test_a_worker_routes_around_the_replica_the_driver_is_updating(
    tmp_path: Path, handle
) -> None:
    gate = handle(GateService(eta=2))
    driver, worker = ReplicaSet.from_urls(URLS), ReplicaSet.from_urls(URLS)
    store = AsyncRunStore.open(tmp_path)
    updating = driver.replicas[URLS[0]]
    mirrored = worker.replicas[URLS[0]]
    try:
        async with (
            publishing_withheld(gate, {"policy": driver}),
            following_withheld(gate, {"policy": worker}, store, "w0"),
        ):
            assert all(r.serving for r in worker.replicas.values())
            async with driver.withheld(updating) as taken:
                assert taken
                await _until(lambda: mirrored.state is ReplicaState.UPDATING)
                assert [r.url for r in worker.serving()] == [URLS[1]]
            await _until(lambda: mirrored.state is ReplicaState.HEALTHY)
            assert len(worker.serving()) == 2
        events = await store.events(ROUTING_WITHHELD)
        assert [(e["subject"], e["data"]["urls"]) for e in events] == [("policy", [URLS[0]])]
    finally:
        await store.close()
        await driver.close()
        await worker.close()


def test_the_last_serving_replica_is_never_taken_out() -> None:
    pool = ReplicaSet.from_urls(URLS)
    pool.replicas[URLS[1]].state = ReplicaState.DOWN
    assert pool.mirror_withheld({URLS[0]}) == []
    assert pool.replicas[URLS[0]].serving  # the only one serving stays routed
