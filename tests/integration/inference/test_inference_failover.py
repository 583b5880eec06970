"""Two real hf replicas behind an InferencePool: killing one mid-load loses no request."""

from __future__ import annotations

import asyncio

import pytest

from cua_rl.inference.pool import InferencePool

pytestmark = pytest.mark.model


async def test_killing_a_replica_mid_load_loses_no_request(server_factory) -> None:
    a, b = server_factory(), server_factory()
    pool = InferencePool([a.url, b.url], timeout_s=60, probe_interval_s=0.2, wait_for_replica_s=60)
    messages = [{"role": "user", "content": "Scroll down and click Save."}]
    gate = asyncio.Semaphore(6)  # steady load: a few requests always in flight on each replica
    started: set[int] = set()

    async def one(i: int):
        async with gate:
            started.add(i)
            return await pool.chat(
                messages, session_key=f"episode-{i % 4}", temperature=1.0, max_tokens=16, seed=i
            )

    tasks = [asyncio.create_task(one(i)) for i in range(24)]
    pending = set(tasks)
    async with asyncio.timeout(120):
        while len(tasks) - len(pending) < 4 or pool.in_flight()[a.url] == 0:
            assert pending, "load finished before replica a could be killed mid-request"
            _, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
    in_flight_on_a = pool.in_flight()[a.url]
    unfinished = [t for t in tasks if not t.done()]
    not_started = [t for i, t in enumerate(tasks) if not t.done() and i not in started]
    a.kill()
    results = await asyncio.wait_for(asyncio.gather(*tasks), 300)
    await pool.close()

    assert in_flight_on_a > 0
    assert len(results) == 24
    assert all(len(r.choices) == 1 and r.choices[0].token_ids for r in results)
    assert a.url not in [r.url for r in pool.replicas.serving()]
    # A request a had already answered (its reply in our socket when a died) may still count
    # as a's; everything else that was unfinished, and every request not yet sent, ran on b.
    answered_by_a = [t for t in unfinished if t.result().url == a.url]
    assert len(answered_by_a) <= in_flight_on_a
    assert not_started and all(t.result().url == b.url for t in not_started)
