"""ReplicaSet's state machine against real local aiohttp servers that a test can stop,
restart or break (the handle stands for a server process)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable

import pytest
from aiohttp import web

from cua_rl.inference.client import InferenceClient
from cua_rl.inference.pool import InferencePool
from cua_rl.inference.replica_set import Replica, ReplicaSet, ReplicaState, SupervisionConfig
from cua_rl.inference.server_auth import admin_allowed

MESSAGES = [{"role": "user", "content": "hi"}]
FAST = SupervisionConfig(
    health_interval_s=0.05,
    health_timeout_s=1.0,
    unresponsive_after_s=0.5,
    restart_attempts=2,
    restart_backoff_s=0.01,
    max_restart_backoff_s=0.02,
)


class Server:
    """A replica process stand-in: a chat server with a version, stoppable and
    restartable on the same port (a `ReplicaHandle`)."""

    def __init__(self, version: int = 0) -> None:
        self.version = version
        self.start_version = version
        self.runner: web.AppRunner | None = None
        self.port = 0
        self.restarts = 0
        self.fail_restarts = False
        self.hang_health = False
        self.events: list[str] = []
        self._killed = asyncio.Event()

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/health", self.health)
        app.router.add_post("/v1/chat/completions", self.chat)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", self.port).start()
        self.port = self.runner.addresses[0][1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def alive(self) -> bool:
        return self.runner is not None

    async def kill(self) -> None:
        self._killed.set()  # release hung handlers, as a dying process would
        self._killed = asyncio.Event()
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None

    async def restart(self) -> None:
        self.events.append("restart")
        await self.kill()
        if self.fail_restarts:
            raise RuntimeError("the server did not start")
        self.version = self.start_version  # a fresh process serves its start-up weights
        self.hang_health = False
        await self.start()
        self.restarts += 1

    async def stop(self) -> None:
        await self.kill()

    async def health(self, _request: web.Request) -> web.Response:
        if self.hang_health:
            await self._killed.wait()
            return web.json_response({"status": "dying"}, status=503)
        return web.json_response({"status": "ok", "version": self.version})

    async def chat(self, _request: web.Request) -> web.Response:
        self.events.append(f"chat v{self.version}")
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": "ok"},
            "finish_reason": "stop",
            "token_ids": [5],
            "logprobs": {"content": [{"token": "a", "logprob": -0.5}]},
        }
        return web.json_response(
            {"choices": [choice]}, headers={"x-model-version": str(self.version)}
        )


@pytest.fixture
async def servers() -> AsyncIterator[list[Server]]:
    started = [Server(), Server()]
    for server in started:
        await server.start()
    yield started
    for server in started:
        await server.kill()


def _set(servers: list[Server], handles: bool = True, **kwargs) -> ReplicaSet:
    return ReplicaSet(
        [
            Replica(
                s.url, InferenceClient(s.url, timeout_s=2), handle=s if handles else None, version=0
            )
            for s in servers
        ],
        name="policy",
        config=kwargs.pop("config", FAST),
        probe_interval_s=0.02,
        **kwargs,
    )


async def eventually(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    """Poll state owned by the code under test, with a deadline."""
    async with asyncio.timeout(timeout_s):
        while not condition():  # noqa: ASYNC110 - polling supervisor state, with a deadline
            await asyncio.sleep(0.01)


async def test_a_dead_process_is_noticed_restarted_and_caught_up_before_serving(
    servers: list[Server],
) -> None:
    replicas = _set(servers)
    dead, other = servers
    replicas.target_version = 4  # the learner has moved on since the replicas started

    async def catch_up(replica: Replica) -> int:
        assert replica.state is ReplicaState.CATCHING_UP  # not routed meanwhile
        dead.events.append("catch-up")
        dead.version = replicas.target_version
        return dead.version

    replicas.catch_up = catch_up
    replicas.start_monitor()
    await dead.kill()  # no request fails: the monitor notices the process is gone
    replica = replicas.replicas[dead.url]
    await eventually(lambda: replica.state is ReplicaState.HEALTHY and dead.restarts == 1)
    assert dead.events == ["restart", "catch-up"]
    assert replica.version == 4 and replica.restarts == 1
    assert replicas.replicas[other.url].state is ReplicaState.HEALTHY
    await replicas.close()


async def test_requests_route_around_and_wait_for_a_restarting_replica(
    servers: list[Server],
) -> None:
    only = servers[:1]
    replicas = _set(only)
    pool = InferencePool(replicas, timeout_s=2, wait_for_replica_s=10)
    await only[0].kill()
    # The request fails on the dead replica, waits while it restarts, then is served.
    result = await pool.chat(MESSAGES)
    assert result.url == only[0].url and only[0].restarts == 1
    await pool.close()


async def test_a_hung_replica_is_restarted_after_the_unresponsive_deadline(
    servers: list[Server],
) -> None:
    replicas = _set(servers, config=FAST.model_copy(update={"health_timeout_s": 0.2}))
    hung = servers[0]
    hung.hang_health = True
    replicas.start_monitor()
    replica = replicas.replicas[hung.url]
    await eventually(lambda: replica.state is not ReplicaState.HEALTHY)
    await eventually(lambda: replica.state is ReplicaState.HEALTHY)
    assert hung.restarts == 1
    await replicas.close()


async def test_a_replica_is_given_up_after_its_restarts_and_requests_fail_at_once(
    servers: list[Server], caplog: pytest.LogCaptureFixture
) -> None:
    only = servers[:1]
    only[0].fail_restarts = True
    replicas = _set(only)
    pool = InferencePool(replicas, timeout_s=2, wait_for_replica_s=600)
    await only[0].kill()
    loop = asyncio.get_running_loop()
    started = loop.time()
    with caplog.at_level(logging.ERROR), pytest.raises(Exception, match="given up"):
        await pool.chat(MESSAGES)
    assert loop.time() - started < 10  # not the 600 s wait
    assert replicas.replicas[only[0].url].state is ReplicaState.FAILED
    assert only[0].events == ["restart"] * FAST.restart_attempts
    given_up = [r.getMessage() for r in caplog.records if "given up" in r.getMessage()]
    assert len(given_up) == 1 and only[0].url in given_up[0], given_up
    await pool.close()


async def test_a_given_up_replica_is_tried_again_later_and_serves(servers: list[Server]) -> None:
    """A run of days outlives a bad minute: a replica given up on (its restarts failed)
    gets a new incident `retry_given_up_s` later, and serves once a restart works."""
    only = servers[:1]
    only[0].fail_restarts = True
    replicas = _set(only, config=FAST.model_copy(update={"retry_given_up_s": 0.3}))
    pool = InferencePool(replicas, timeout_s=2, wait_for_replica_s=30)
    await only[0].kill()
    replica = replicas.replicas[only[0].url]
    with pytest.raises(Exception, match="given up"):
        await pool.chat(MESSAGES)
    assert replica.state is ReplicaState.FAILED
    only[0].fail_restarts = False
    await eventually(lambda: replica.state is ReplicaState.HEALTHY)
    assert only[0].events == ["restart"] * (FAST.restart_attempts + 1)
    assert (await pool.chat(MESSAGES)) is not None
    await pool.close()


async def test_a_replica_without_a_handle_is_probed_back_never_restarted(
    servers: list[Server],
) -> None:
    replicas = _set(servers, handles=False)
    down = replicas.replicas[servers[0].url]
    replicas.mark_down(down, "test")
    assert down.state is ReplicaState.DOWN and [r.url for r in replicas.serving()] == [
        servers[1].url
    ]
    await eventually(lambda: down.state is ReplicaState.HEALTHY)
    assert servers[0].restarts == 0
    await replicas.close()


async def test_a_failed_catch_up_keeps_the_replica_out_until_one_succeeds(
    servers: list[Server],
) -> None:
    replicas = _set(servers[:1], config=FAST.model_copy(update={"unresponsive_after_s": 60}))
    replicas.target_version = 2
    tries: list[int] = []

    async def catch_up(replica: Replica) -> int:
        tries.append(1)
        if len(tries) < 3:
            raise ConnectionError("update refused")
        return 2

    replicas.catch_up = catch_up
    replica = next(iter(replicas.replicas.values()))
    replicas.mark_down(replica, "test")
    await eventually(lambda: replica.state is ReplicaState.HEALTHY)
    assert len(tries) == 3 and replica.version == 2
    await replicas.close()


@pytest.mark.parametrize(
    ("header", "token", "peer", "allowed"),
    [
        ("Bearer s3cret", "s3cret", "10.0.0.2", True),
        ("Bearer wrong", "s3cret", "127.0.0.1", False),
        (None, "s3cret", "127.0.0.1", False),
        ("Basic s3cret", "s3cret", "127.0.0.1", False),
        ("Bearer s\u00e9cret", "s3cret", "127.0.0.1", False),
        (None, None, "127.0.0.1", True),
        (None, None, "::1", True),
        (None, None, "10.0.0.2", False),
        (None, None, None, False),
    ],
)
def test_admin_credential(
    header: str | None, token: str | None, peer: str | None, allowed: bool
) -> None:
    assert admin_allowed(header, token, peer) is allowed
