"""The driver's `RemoteReplica` handle over a plain `ModelReplica`, without Ray: the
actor is an in-process stand-in (conftest), the server a real child process that
answers /health (no model), so a SIGKILL, a restart on the same port and a stop are
real. Also: a dead actor makes a supervised set give up with the actor's error."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from cua_rl.errors import InferenceUnavailable
from cua_rl.inference.client import InferenceClient
from cua_rl.inference.config import ModelServersConfig
from cua_rl.inference.replica_process import start_server
from cua_rl.inference.replica_set import Replica, ReplicaSet, ReplicaState, SupervisionConfig
from cua_rl.net_ports import reserve_port
from cua_rl.process_launch import ProcessLaunch
from cua_rl.runtime.ray.replica_handle import RemoteReplica
from cua_rl.runtime.ray.replicas import ModelReplica, advertised_host

HEALTH_SERVER = """
import sys
from aiohttp import web
async def health(_request):
    return web.json_response({"status": "ok", "version": 0})
app = web.Application()
app.router.add_get("/health", health)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None)
"""
FAST = SupervisionConfig(
    health_interval_s=0.05,
    health_timeout_s=1.0,
    unresponsive_after_s=30,
    restart_attempts=2,
    restart_backoff_s=0.01,
    max_restart_backoff_s=0.02,
)


async def until(condition: Callable[[], bool], what: str, timeout_s: float = 20.0) -> None:
    """Poll `condition` until it holds; fail naming `what` after `timeout_s`."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout_s
    while not condition():
        assert loop.time() < end, f"not within {timeout_s:g} s: {what}"
        await asyncio.sleep(0.02)


@pytest.fixture
async def replica(tmp_path: Path) -> AsyncIterator[ModelReplica]:
    """A `ModelReplica` whose server is a small /health process (its `start` would
    serve a model; everything after the start is what is under test)."""
    plain = ModelReplica(
        ModelServersConfig(),
        name="policy-0",
        log_dir=tmp_path,
        tiny_dir=tmp_path,
        version=0,
        bind_host="127.0.0.1",
        advertise_host="127.0.0.1",
    )
    plain.server = await start_server(
        lambda port: ProcessLaunch("health", (sys.executable, "-c", HEALTH_SERVER, str(port))),
        log_path=tmp_path / "policy-0.log",
        ready_timeout_s=20,
        what="health server",
    )
    plain.url = plain.server.url
    yield plain
    await plain.stop()


async def test_a_killed_server_reads_dead_and_restarts_on_its_url_through_the_actor(
    replica: ModelReplica, handle: Callable[[Any], Any]
) -> None:
    assert replica.server is not None and replica.url is not None
    remote = RemoteReplica(handle(replica), replica.url, restart_timeout_s=30)
    first = replica.server.proc
    assert first is not None and remote.alive()
    os.kill(first.pid, signal.SIGKILL)
    await until(lambda: not remote.alive(), "the handle reads the server as dead")

    await remote.restart()

    assert remote.alive() and replica.server.proc is not first
    assert replica.server.url == remote.url  # same port: the set's URL stays valid
    client = InferenceClient(remote.url)
    try:
        assert await client.health()
    finally:
        await client.close()
    await remote.stop()
    assert replica.server.proc.returncode is not None  # stopped through the actor


async def test_an_answer_asked_before_a_restart_does_not_outlive_it(
    replica: ModelReplica, handle: Callable[[Any], Any]
) -> None:
    assert replica.url is not None
    gate = asyncio.Event()
    alive = replica.alive
    answers: list[bool] = []

    async def slow_alive() -> bool:
        answers.append(await alive())  # asked now, answered after the restart
        await gate.wait()
        return answers[-1]

    remote = RemoteReplica(handle(replica), replica.url, restart_timeout_s=30)
    assert replica.server is not None and replica.server.proc is not None
    os.kill(replica.server.proc.pid, signal.SIGKILL)
    await replica.server.proc.wait()
    replica.alive = slow_alive  # type: ignore[method-assign]
    remote.alive()  # asks; the answer ("dead") is held until after the restart
    await until(lambda: answers == [False], "the actor read the dead server")
    await remote.restart()
    gate.set()
    assert remote._check is not None
    await remote._check
    assert remote.alive(), "a stale 'dead' would restart a fresh replica again"
    await remote.close()


async def test_stop_cancels_a_restart_in_progress_and_none_starts_after(
    replica: ModelReplica,
) -> None:
    assert replica.server is not None
    replica.server.argv = [sys.executable, "-c", "import time; time.sleep(60)"]  # never healthy
    first = replica.server.proc
    restart = asyncio.create_task(replica.restart())
    await until(
        lambda: replica.server is not None and replica.server.proc is not first,
        "the restart spawned its server",
    )
    spawned = replica.server.proc
    assert spawned is not None and spawned.returncode is None

    await replica.stop()

    with pytest.raises(asyncio.CancelledError):
        await restart
    assert spawned.returncode is not None  # the half-started server went with it
    with pytest.raises(InferenceUnavailable, match="is stopped"):
        await replica.restart()
    assert replica.server.proc is spawned


class DeadActor:
    """What calls to a dead Ray actor do: raise (RayActorError in a real run)."""

    async def alive(self) -> bool:
        raise RuntimeError("The actor died unexpectedly before finishing this task")

    async def restart(self) -> str:
        raise RuntimeError("The actor died unexpectedly before finishing this task")

    async def stop(self) -> None:
        raise RuntimeError("The actor died unexpectedly before finishing this task")


async def test_a_dead_actor_makes_the_set_give_up_with_its_error(
    handle: Callable[[Any], Any],
) -> None:
    with reserve_port() as port:  # bound, nothing listening: the server is gone too
        url = f"http://127.0.0.1:{port.port}"
        remote = RemoteReplica(handle(DeadActor()), url, restart_timeout_s=5)
        replicas = ReplicaSet(
            [Replica(url, InferenceClient(url), handle=remote)],
            name="policy",
            config=FAST,
            probe_interval_s=0.02,
        )
        try:
            replicas.start_monitor()
            victim = replicas.replicas[url]
            await until(lambda: victim.state is ReplicaState.FAILED, "the set gives up")
        finally:
            await replicas.close()
            await remote.close()
    assert victim.restarts == 0
    assert "restart failed" in victim.reason and "actor died" in victim.reason


async def test_a_server_that_came_back_elsewhere_is_a_failed_restart(
    handle: Callable[[Any], Any],
) -> None:
    class Moved:
        async def alive(self) -> bool:
            return True

        async def restart(self) -> str:
            return "http://127.0.0.1:1"

    remote = RemoteReplica(handle(Moved()), "http://127.0.0.1:2/", restart_timeout_s=5)
    with pytest.raises(InferenceUnavailable, match="came back on http://127.0.0.1:1"):
        await remote.restart()
    assert not remote.alive()
    await remote.close()


def test_a_replica_bound_to_one_address_is_reached_there_not_on_the_node_ip() -> None:
    assert advertised_host("127.0.0.1", "192.0.2.2") == "127.0.0.1"
    assert advertised_host("0.0.0.0", "192.0.2.2") == "192.0.2.2"
    assert advertised_host("::", "192.0.2.2") == "192.0.2.2"
