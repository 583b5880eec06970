"""Fixtures for the tiny model and real `cua-rl serve --engine hf` processes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class ServerProcess:
    process: subprocess.Popen
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


def _healthy(url: str) -> bool:
    """Synchronous probe, so fixtures can start servers from inside async tests."""
    try:
        with urllib.request.urlopen(url + "/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def start_server(model_dir: Path, log_dir: Path, deadline_s: float = 120.0) -> ServerProcess:
    """Start a server process and poll /health until it answers (no fixed sleep)."""
    port = free_port()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    log = open(log_dir / f"server-{port}.log", "wb")  # noqa: SIM115 - lives with the process
    process = subprocess.Popen(
        [sys.executable, "-m", "cua_rl.cli", "serve", "--engine", "hf", "--model", str(model_dir),
         "--port", str(port), "--threads", "1", "--version", "0"],
        stdout=log, stderr=subprocess.STDOUT, env=env,
    )  # fmt: skip
    server = ServerProcess(process, port)
    deadline = time.monotonic() + deadline_s
    try:
        while not _healthy(server.url):
            if process.poll() is not None:
                log_text = (log_dir / f"server-{port}.log").read_text()
                raise RuntimeError(f"server exited: {log_text}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"server on {port} not healthy after {deadline_s} s")
            time.sleep(0.2)  # poll interval, not a readiness sleep
    except BaseException:
        server.kill()  # never leak a server process, whatever interrupted the wait
        raise
    return server


@pytest.fixture(scope="module")
def hf_server(
    tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    server = start_server(tiny_model_dir, tmp_path_factory.mktemp("logs"))
    yield server
    server.kill()


@pytest.fixture
def server_factory(tiny_model_dir: Path, tmp_path: Path) -> Iterator[Callable[[], ServerProcess]]:
    started: list[ServerProcess] = []

    def factory() -> ServerProcess:
        started.append(start_server(tiny_model_dir, tmp_path))
        return started[-1]

    yield factory
    for server in started:
        server.kill()
