"""Staggered weight sync (`train.sync.staggered`) against real model servers on
127.0.0.1 whose updates take time (tests_support/fake_model_server.py): the replica
under update leaves routing, the others keep serving, no request is lost."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from tests_support.fake_model_server import FakeModelConfig, FakeModelServer

from cua_rl.inference.pool import InferencePool
from cua_rl.inference.replica_set import ReplicaSet
from cua_rl.learner.config import WeightSyncConfig
from cua_rl.learner.weight_sync import WeightSync

MESSAGES = [{"role": "user", "content": "hi"}]
DEADLINE_S = 30.0


class Source:
    """The learner's side of a checkpoint-mode sync: writes a (dummy) export."""

    def named_parameters(self):  # noqa: ANN201 - unused in checkpoint mode
        return iter(())

    def export_weights(self, path: Path) -> Path:
        path.mkdir(parents=True, exist_ok=True)
        (path / "config.json").write_text("{}")
        return path


@contextlib.asynccontextmanager
async def pool_of(
    n: int, tmp_path: Path, staggered: bool
) -> AsyncIterator[tuple[list[FakeModelServer], InferencePool, WeightSync]]:
    servers = [FakeModelServer(FakeModelConfig(chat_s=0.01, update_s=0.3)) for _ in range(n)]
    for server in servers:
        await server.start()
    replicas = ReplicaSet.from_urls([s.url for s in servers], timeout_s=10.0, probe_interval_s=0.05)
    pool = InferencePool(replicas, wait_for_replica_s=DEADLINE_S)
    sync = WeightSync(
        replicas,
        WeightSyncConfig(mode="checkpoint", staggered=staggered, timeout_s=10.0),
        tmp_path / "exports",
    )
    try:
        yield servers, pool, sync
    finally:
        await pool.close()
        for server in servers:
            await server.stop()


async def sync_under_load(
    servers: list[FakeModelServer], pool: InferencePool, sync: WeightSync, syncs: int = 3
) -> tuple[int, int, int]:
    """`syncs` pushes while 4 clients send requests (half of them in episodes); returns
    (requests sent, answered, fewest replicas routed at any state change)."""
    stop = asyncio.Event()
    sent, answered, fewest = [0], [0], [len(servers)]

    async def client(k: int) -> None:
        step = 0
        while not stop.is_set():
            sent[0] += 1
            step += 1
            session = f"episode-{k}-{step // 5}" if k % 2 else None
            await pool.chat(MESSAGES, session_key=session)
            answered[0] += 1

    async def watch() -> None:
        while not stop.is_set():
            await pool.replicas.changed(DEADLINE_S)
            fewest[0] = min(fewest[0], len(pool.replicas.serving()))

    watcher = asyncio.create_task(watch())
    clients = [asyncio.create_task(client(k)) for k in range(4)]
    try:
        async with asyncio.timeout(DEADLINE_S):
            for version in range(1, syncs + 1):
                assert await sync.push(Source(), version) == [version] * len(servers)
            stop.set()
            await asyncio.gather(*clients)  # raises if any request was lost
    finally:
        watcher.cancel()
        for task in clients:
            task.cancel()
        await asyncio.gather(watcher, *clients, return_exceptions=True)
    return sent[0], answered[0], fewest[0]


async def test_staggered_sync_keeps_a_replica_routed_and_none_under_update(tmp_path: Path) -> None:
    async with pool_of(2, tmp_path, staggered=True) as (servers, pool, sync):
        sent, answered, fewest = await sync_under_load(servers, pool, sync)
        assert sent == answered > 0
        assert fewest >= 1
        assert [s.updates for s in servers] == [3, 3]
        # the invariant itself: no request was routed to a replica under update
        assert [s.during_update for s in servers] == [0, 0]
        # both routed again
        assert [r.url for r in pool.replicas.serving()] == [s.url for s in servers]


async def test_unstaggered_sync_routes_requests_to_the_replica_under_update(tmp_path: Path) -> None:
    """The switch off gives the old behaviour, which the check above catches."""
    async with pool_of(2, tmp_path, staggered=False) as (servers, pool, sync):
        sent, answered, _ = await sync_under_load(servers, pool, sync)
        assert sent == answered > 0
        assert sum(s.during_update for s in servers) > 0


async def test_one_replica_stays_routed_and_requests_wait_for_its_update(tmp_path: Path) -> None:
    async with pool_of(1, tmp_path, staggered=True) as (servers, pool, sync):
        sent, answered, fewest = await sync_under_load(servers, pool, sync, syncs=2)
        assert sent == answered > 0
        assert fewest == 1
        assert servers[0].during_update > 0  # they waited for it, as unstaggered


async def until(condition, what: str) -> None:  # noqa: ANN001
    async with asyncio.timeout(DEADLINE_S):
        while not condition():  # noqa: ASYNC110 - a server's state, polled to a deadline
            await asyncio.sleep(0.01)
    assert condition(), what


async def test_episode_served_elsewhere_during_its_replicas_update_comes_back(
    tmp_path: Path,
) -> None:
    async with pool_of(2, tmp_path, staggered=True) as (servers, pool, sync):
        first = await pool.chat(MESSAGES, session_key="episode")
        home = next(s for s in servers if s.url == first.url)
        home.hold = asyncio.Event()
        other = next(s for s in servers if s is not home)
        push = asyncio.create_task(sync.push(Source(), 1))
        try:
            # the home replica is updated first or second: wait until it is under update
            await until(lambda: home.updating, "the home replica never started its update")
            during = await pool.chat(MESSAGES, session_key="episode")
            assert during.url == other.url
            home.hold.set()
            assert await asyncio.wait_for(push, DEADLINE_S) == [1, 1]
        finally:
            home.hold.set()
            await asyncio.gather(push, return_exceptions=True)
        after = await pool.chat(MESSAGES, session_key="episode")
        assert after.url == home.url and after.model_version == 1


async def test_last_serving_replica_down_puts_the_updating_one_back(tmp_path: Path) -> None:
    """Withholding never leaves the pool with nothing to route to: when the other
    replica dies during an update, requests go to the updating one and wait for it."""
    async with pool_of(2, tmp_path, staggered=True) as (servers, pool, sync):
        updating, alive = servers  # the sync goes in the set's order: first one first
        updating.hold = asyncio.Event()
        push = asyncio.create_task(sync.push(Source(), 1))
        try:
            await until(lambda: updating.updating, "no update started")
            assert [r.url for r in pool.replicas.serving()] == [alive.url]
            await alive.stop()
            request = asyncio.create_task(pool.chat(MESSAGES))
            await until(
                lambda: updating.during_update == 1,
                "the request did not go to the updating replica",
            )
            updating.hold.set()
            result = await asyncio.wait_for(request, DEADLINE_S)
            assert result.url == updating.url
        finally:
            updating.hold.set()
            await asyncio.gather(push, return_exceptions=True)


@pytest.mark.parametrize("staggered", [True, False])
def test_the_switch_is_a_weight_sync_setting(staggered: bool) -> None:
    assert WeightSyncConfig().staggered is True
    assert WeightSyncConfig(staggered=staggered).staggered is staggered
