"""Model-server ports taken by another socket: a first start moves to another port, a
restart (which must keep its URL) fails clearly and is retried by the supervisor.

The servers are real child processes: a stand-in that answers /health and binds the
way `cua-rl serve` does (tests_support/health_server.py), and once the real hf server
of the tiny model through the launcher. The "thief" is a listening socket the test
binds on the picked port after the pick, as another process's server would.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import tests_support.health_server as health_server
from tests_support.ports import PortThief, listen, released

from cua_rl import net_ports
from cua_rl.errors import InferenceUnavailable
from cua_rl.inference.client import InferenceClient
from cua_rl.inference.config import ModelServersConfig, SupervisionConfig
from cua_rl.inference.replica_process import ServerProcess, start_server
from cua_rl.inference.replica_set import Replica, ReplicaSet, ReplicaState
from cua_rl.net_ports import port_taken
from cua_rl.process_launch import ProcessLaunch

STAND_IN = [sys.executable, health_server.__file__, "127.0.0.1"]


@pytest.fixture
def thief(monkeypatch: pytest.MonkeyPatch) -> Iterator[PortThief]:
    """Steals the ports `start_server` picks, when armed."""
    thief = PortThief()
    monkeypatch.setattr(net_ports, "reserve_port", thief.wrap(net_ports.reserve_port))
    yield thief
    thief.close()


def stand_in(port: int) -> ProcessLaunch:
    return ProcessLaunch("stand-in", (*STAND_IN, str(port)))


async def test_a_server_whose_port_was_taken_starts_on_another(
    thief: PortThief, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    stolen = thief.arm(1)
    with caplog.at_level(logging.WARNING):
        handle = await start_server(
            stand_in, log_path=tmp_path / "s.log", ready_timeout_s=60, what="start of the stand-in"
        )
    try:
        assert handle.port is not None and handle.port.port != stolen[0]
        assert handle.url == f"http://127.0.0.1:{handle.port.port}"
        client = InferenceClient(handle.url, timeout_s=5)
        assert await client.health()
        await client.close()
        assert "address already in use" in (tmp_path / "s.log").read_text().lower()
        retries = [
            r.getMessage()
            for r in caplog.records
            if r.getMessage().startswith("start of the stand-in failed")
        ]
        assert len(retries) == 1 and f"127.0.0.1:{stolen[0]} is in use" in retries[0]
    finally:
        await handle.close()
    assert released(handle.port)


async def test_a_restart_on_a_taken_port_fails_clearly_and_succeeds_once_it_is_free(
    tmp_path: Path,
) -> None:
    handle = await start_server(
        stand_in, log_path=tmp_path / "s.log", ready_timeout_s=60, what="start of the stand-in"
    )
    assert handle.port is not None and handle.proc is not None
    port = handle.port.port
    try:
        os.killpg(handle.proc.pid, signal.SIGKILL)
        await handle.proc.wait()
        with listen(port):  # taken while the replica is down
            with pytest.raises(InferenceUnavailable) as info:
                await handle.restart()
            assert port_taken(info.value)
            assert str(info.value).startswith(f"port 127.0.0.1:{port} is in use")
            assert not handle.alive()
        await handle.restart()  # the port is free again: same URL, serving
        assert handle.alive() and handle.url.endswith(f":{port}")
    finally:
        await handle.close()


async def test_the_supervisor_retries_then_fails_a_replica_whose_port_stays_taken(
    tmp_path: Path,
) -> None:
    handle = await start_server(
        stand_in, log_path=tmp_path / "s.log", ready_timeout_s=60, what="start of the stand-in"
    )
    assert handle.port is not None and handle.proc is not None
    config = SupervisionConfig(
        health_interval_s=0.2,
        health_timeout_s=0.5,
        restart_attempts=2,
        restart_backoff_s=0.05,
        max_restart_backoff_s=0.1,
    )
    replica = Replica(handle.url, InferenceClient(handle.url, 5), handle=handle)
    replicas = ReplicaSet([replica], config=config, probe_interval_s=0.1)
    try:
        os.killpg(handle.proc.pid, signal.SIGKILL)
        await handle.proc.wait()
        with listen(handle.port.port):
            await replicas.check()  # notices the dead process, starts its supervisor
            async with asyncio.timeout(60):
                while replica.state is not ReplicaState.FAILED:  # noqa: ASYNC110
                    await replicas.changed(1.0)
        assert replica.restarts == 0
        assert f"port 127.0.0.1:{handle.port.port} is in use" in replica.reason
    finally:
        await replicas.close()
        await handle.close()


@pytest.mark.model
async def test_the_launcher_moves_a_replica_whose_port_was_taken(
    thief: PortThief, tiny_model_dir: Path, tmp_path: Path
) -> None:
    from cua_rl.inference.launcher import replica_set

    stolen = thief.arm(1)
    cfg = ModelServersConfig(replicas=1, ready_timeout_s=300)
    async with replica_set(
        cfg, name="policy", log_dir=tmp_path / "logs", tiny_dir=tiny_model_dir
    ) as replicas:
        (url,) = replicas.urls
        assert not url.endswith(f":{stolen[0]}")
        replica = replicas.replicas[url]
        assert await replica.client.health()
        assert isinstance(replica.handle, ServerProcess)
    log = (tmp_path / "logs" / "policy-0.log").read_text().lower()
    assert "address already in use" in log
