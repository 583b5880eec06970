"""A hung replica (accepts connections, never answers) next to a working one, both real
servers on 127.0.0.1: the pool keeps the connections and requests it sends the hung one
within its per-replica bound, and once the hung one's oldest request is far older than
its peer's, new requests (and episodes stuck to it) go to the peer (issue 48)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

import pytest
from tests_support.fake_model_server import FakeModelServer, HungServer

from cua_rl.inference.client import InferenceClient
from cua_rl.inference.pool import InferencePool

MESSAGES = [{"role": "user", "content": "hi"}]


async def eventually(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    """Poll state of the code under test (it exposes no event to wait on)."""
    async with asyncio.timeout(timeout_s):
        while not condition():  # noqa: ASYNC110 - polling pool state, with a deadline
            await asyncio.sleep(0.01)


@pytest.fixture
async def pair() -> AsyncIterator[tuple[HungServer, FakeModelServer]]:
    hung, peer = HungServer(), FakeModelServer()
    await hung.start()
    await peer.start()
    yield hung, peer
    await peer.stop()
    await hung.stop()


async def _cancel(tasks: list[asyncio.Task]) -> None:
    for task in tasks:
        task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_a_client_opens_at_most_its_connections_to_a_hung_server(
    pair: tuple[HungServer, FakeModelServer],
) -> None:
    hung, _ = pair
    client = InferenceClient(hung.url, timeout_s=30.0, max_connections=2)
    tasks = [asyncio.create_task(client.chat(MESSAGES)) for _ in range(6)]
    await eventually(lambda: hung.accepted == 2)
    await asyncio.sleep(0.3)  # time for any third connection to arrive
    assert hung.accepted == 2
    await _cancel(tasks)
    await client.close()


async def test_requests_to_a_hung_replica_stay_within_the_bound(
    pair: tuple[HungServer, FakeModelServer],
) -> None:
    hung, peer = pair
    pool = InferencePool(
        [hung.url, peer.url],
        request_timeout_s=60.0,
        wait_for_replica_s=60.0,
        max_in_flight_per_replica=3,
        stall_factor=None,
    )
    tasks = [asyncio.create_task(pool.chat(MESSAGES)) for _ in range(40)]
    await eventually(lambda: peer.requests == 37, timeout_s=20.0)
    assert pool.in_flight()[hung.url] == 3
    assert hung.accepted == 3
    assert sum(t.done() for t in tasks) == 37
    await _cancel(tasks)
    await pool.close()


async def test_new_requests_go_around_a_stalled_replica(
    pair: tuple[HungServer, FakeModelServer],
) -> None:
    hung, peer = pair
    pool = InferencePool(
        [hung.url, peer.url],
        request_timeout_s=60.0,
        wait_for_replica_s=60.0,
        max_in_flight_per_replica=8,
        stall_factor=3.0,
        stall_after_s=0.3,
    )
    # both idle: the first request of an episode lands on the hung replica (first listed)
    stuck = asyncio.create_task(pool.chat(MESSAGES, session_key="episode"))
    await eventually(lambda: pool.in_flight()[hung.url] == 1)
    assert (await pool.chat(MESSAGES)).url == peer.url  # least loaded
    await asyncio.sleep(0.5)  # its oldest request now far older than the peer's
    results = await asyncio.gather(*(pool.chat(MESSAGES) for _ in range(20)))
    assert {r.url for r in results} == {peer.url}
    assert (await pool.chat(MESSAGES, session_key="other")).url == peer.url
    assert pool.in_flight()[hung.url] == 1 and hung.accepted == 1
    assert pool.replicas.replicas[hung.url].stalled
    # the episode stuck to it moves for good (the sticky map now names the peer)
    assert pool._sticky["episode"] == hung.url
    assert (await pool.chat(MESSAGES, session_key="episode")).url == peer.url
    assert pool._sticky["episode"] == peer.url
    assert peer.requests == 23
    await _cancel([stuck])
    await pool.close()


async def test_a_stalled_replica_is_never_the_only_one_left(
    pair: tuple[HungServer, FakeModelServer],
) -> None:
    """Both replicas hang: the one with the youngest oldest request stays routable,
    so requests still go somewhere (and wait for their deadline there)."""
    hung, _ = pair
    other = HungServer()
    await other.start()
    pool = InferencePool(
        [hung.url, other.url],
        request_timeout_s=60.0,
        wait_for_replica_s=60.0,
        stall_factor=2.0,
        stall_after_s=0.2,
    )
    first = asyncio.create_task(pool.chat(MESSAGES))
    await eventually(lambda: hung.accepted == 1)
    await asyncio.sleep(0.5)
    later = [asyncio.create_task(pool.chat(MESSAGES)) for _ in range(3)]
    await eventually(lambda: other.accepted == 3)
    assert hung.accepted == 1
    await _cancel([first, *later])
    await pool.close()
    await other.stop()
