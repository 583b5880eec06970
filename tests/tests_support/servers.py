"""Start real `cua-rl serve --engine hf` processes for tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from cua_rl.net_ports import pick_port


def free_port() -> int:
    """A loopback port free now, below the ephemeral range (cua_rl/net_ports.py): a
    client socket of the suite cannot take it before the server under test binds it."""
    return pick_port("127.0.0.1")


def _ephemeral_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port_run(count: int) -> int:
    """The first of `count` consecutive free loopback ports, below the ephemeral range.

    Ports handed out by the kernel (bind to 0) come from the ephemeral range, which every
    outgoing connection also draws from: a run picked there can be taken by a client socket
    before the server under test binds it (seen in CI as EADDRINUSE). Below that range only
    explicit binds compete."""
    import random

    top = _ephemeral_start() - count
    for _ in range(200):
        base = random.randint(20000, top)
        socks: list[socket.socket] = []
        try:
            for port in range(base, base + count):
                sock = socket.socket()
                socks.append(sock)
                sock.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for sock in socks:
                sock.close()
    raise RuntimeError(f"no run of {count} free loopback ports below {top + count}")


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


def healthy(url: str) -> bool:
    """Synchronous probe, so fixtures can start servers from inside async tests."""
    try:
        with urllib.request.urlopen(url + "/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def start_hf_server(model_dir: Path, log_dir: Path, deadline_s: float = 120.0) -> ServerProcess:
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
        while not healthy(server.url):
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
