"""InferencePool routing against real local aiohttp servers speaking the chat protocol."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest
from aiohttp import web

from cua_rl.inference.base import InferenceRequestError, InferenceUnavailable
from cua_rl.inference.client import InferenceClient
from cua_rl.inference.pool import InferencePool

MESSAGES = [{"role": "user", "content": "hi"}]


class Replica:
    """A minimal OpenAI-compatible server whose behaviour a test can change."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.mode = "ok"  # ok | fail | bad_request
        self.hold: asyncio.Event | None = None
        self.served = 0
        self.runner: web.AppRunner | None = None
        self.port = 0

    async def start(self, port: int = 0) -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_get("/health", self.health)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", port)
        await site.start()
        self.port = self.runner.addresses[0][1]

    async def stop(self) -> None:
        assert self.runner is not None
        await self.runner.cleanup()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def health(self, _request: web.Request) -> web.Response:
        status = 503 if self.mode == "fail" else 200
        return web.json_response({"status": self.mode}, status=status)

    async def chat(self, _request: web.Request) -> web.Response:
        if self.hold is not None:
            await self.hold.wait()
        if self.mode == "fail":
            return web.json_response({"error": {"message": "boom"}}, status=500)
        if self.mode == "bad_request":
            return web.json_response({"error": {"message": "bad", "param": "n"}}, status=400)
        self.served += 1
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": self.name},
            "finish_reason": "stop",
            "token_ids": [5, 6],
            "logprobs": {
                "content": [{"token": "a", "logprob": -0.5}, {"token": "b", "logprob": -1.5}]
            },
        }
        return web.json_response({"choices": [choice]}, headers={"x-model-version": "3"})


@pytest.fixture
async def replicas() -> AsyncIterator[list[Replica]]:
    reps = [Replica("a"), Replica("b")]
    for r in reps:
        await r.start()
    yield reps
    for r in reps:
        if r.runner is not None:
            await r.runner.cleanup()


async def eventually(condition: Callable[[], bool], timeout_s: float = 5.0) -> None:
    """Poll a condition owned by code under test (it exposes no event to wait on)."""
    async with asyncio.timeout(timeout_s):
        while not condition():  # noqa: ASYNC110 - polling pool state, with a deadline
            await asyncio.sleep(0.01)


def _pool(reps: list[Replica], **kwargs) -> InferencePool:
    kwargs.setdefault("probe_interval_s", 0.05)
    kwargs.setdefault("timeout_s", 5.0)
    return InferencePool([r.url for r in reps], **kwargs)


async def test_client_returns_typed_result(replicas: list[Replica]) -> None:
    client = InferenceClient(replicas[0].url, timeout_s=5)
    result = await client.chat(MESSAGES)
    await client.close()
    assert result.model_version == 3
    assert result.choices[0].token_ids == (5, 6)
    assert result.choices[0].logprobs == (-0.5, -1.5)
    assert result.choices[0].text == "a"


async def test_sticky_sessions_stay_on_their_replica(replicas: list[Replica]) -> None:
    pool = _pool(replicas)
    first = await pool.chat(MESSAGES, session_key="episode-1")
    for _ in range(4):
        again = await pool.chat(MESSAGES, session_key="episode-1")
        assert again.url == first.url
    await pool.close()


async def test_unkeyed_requests_go_to_the_least_loaded_replica(replicas: list[Replica]) -> None:
    pool = _pool(replicas)
    replicas[0].hold = asyncio.Event()
    held = asyncio.create_task(pool.chat(MESSAGES, session_key="s"))
    await eventually(lambda: sum(pool.in_flight().values()) == 1)
    busy = next(url for url, n in pool.in_flight().items() if n == 1)
    assert busy == replicas[0].url  # first pick: both idle, a comes first
    results = [await pool.chat(MESSAGES) for _ in range(3)]
    assert {r.url for r in results} == {replicas[1].url}
    replicas[0].hold.set()
    assert (await held).url == replicas[0].url
    await pool.close()


async def test_failed_replica_is_retried_elsewhere_and_probed_back(replicas: list[Replica]) -> None:
    pool = _pool(replicas)
    first = await pool.chat(MESSAGES, session_key="ep")
    sticky = next(r for r in replicas if r.url == first.url)
    other = next(r for r in replicas if r is not sticky)
    sticky.mode = "fail"
    result = await pool.chat(MESSAGES, session_key="ep")
    assert result.url == other.url
    assert sticky.url not in [r.url for r in pool.replicas.serving()]
    sticky.mode = "ok"
    # the probe puts it back
    await eventually(lambda: sticky.url in [r.url for r in pool.replicas.serving()])
    await pool.close()


async def test_requests_wait_for_a_replica_to_come_back(replicas: list[Replica]) -> None:
    pool = _pool(replicas[:1], wait_for_replica_s=10)
    port = replicas[0].port
    await replicas[0].stop()
    pending = asyncio.create_task(pool.chat(MESSAGES))
    await eventually(lambda: not pool.replicas.serving())
    assert not pending.done()
    await replicas[0].start(port)
    result = await asyncio.wait_for(pending, 10)
    assert result.choices[0].text == "a"
    await pool.close()


async def test_no_replica_before_deadline_raises(replicas: list[Replica]) -> None:
    pool = _pool(replicas[:1], wait_for_replica_s=0.3)
    await replicas[0].stop()
    with pytest.raises(InferenceUnavailable):
        await pool.chat(MESSAGES)
    replicas[0].runner = None
    await pool.close()


async def test_request_errors_are_not_retried(replicas: list[Replica]) -> None:
    pool = _pool(replicas)
    for r in replicas:
        r.mode = "bad_request"
    with pytest.raises(InferenceRequestError) as info:
        await pool.chat(MESSAGES)
    assert info.value.param == "n"
    assert {r.url for r in pool.replicas.serving()} == {r.url for r in replicas}
    await pool.close()
