"""A real desktop for the getter tests: Xvfb on a free display plus `python -m cua_guest`.

One desktop per module. Readiness is `GuestClient.wait_ready` against a
deadline (never a fixed sleep); every process runs in its own session and its
whole group is killed at teardown, so nothing outlives the tests.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests_support.desktops import guest_ready
from tests_support.servers import free_port
from tests_support.xvfb import kill_group, start_xvfb

from cua_rl.desktop.client import GuestClient

TOKEN = "evaluation-test-token-0123456789"


@dataclass(frozen=True)
class Desktop:
    url: str
    token: str
    display: str
    root: Path
    """A scratch folder both the tests and the guest see (same machine)."""


@pytest.fixture(scope="module")
def desktop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Desktop]:
    if importlib.util.find_spec("cua_guest") is None:
        pytest.skip("cua_guest is not importable (pip install -e ./vm/guest, or run ./setup.sh)")
    if shutil.which("Xvfb") is None:
        pytest.skip("Xvfb is not installed (apt-get install xvfb)")
    root = tmp_path_factory.mktemp("eval-desktop")
    procs: list[subprocess.Popen[bytes]] = []
    try:
        xvfb, display = start_xvfb(root / "xvfb.log")
        procs.append(xvfb)
        env = {**os.environ, "DISPLAY": display}
        env.pop("CUA_GUEST_TOKEN", None)
        token_file = root / "token"
        token_file.write_text(TOKEN + "\n")
        port = free_port()
        log = root / "guest.log"
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "cua_guest",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--token-file",
                str(token_file),
            ],
            env=env,
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        procs.append(server)
        url = f"http://127.0.0.1:{port}"
        if not asyncio.run(guest_ready(url, TOKEN)):
            pytest.fail(
                f"guest not ready within 60 s (exit status {server.poll()}): "
                f"{log.read_text()[-2000:]}"
            )
        yield Desktop(url=url, token=TOKEN, display=display, root=root)
    finally:
        for proc in reversed(procs):
            kill_group(proc)


@pytest.fixture
async def client(desktop: Desktop) -> AsyncIterator[GuestClient]:
    async with GuestClient(desktop.url, desktop.token) as c:
        yield c
