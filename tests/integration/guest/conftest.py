"""A real desktop for the guest server tests: Xvfb (+ openbox) and `python -m cua_guest`.

One display and one server per test module. Readiness is decided by polling
/healthz against a deadline; every process runs in its own session and its whole
group is killed at teardown, so nothing outlives the tests.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
from tests_support.guest_server import OSW_UPLOAD_LIMIT, RunningGuest, running_guest
from tests_support.osworld_protocol import OSWorldProtocol
from tests_support.servers import free_port
from tests_support.xvfb import kill_group, start_xvfb

START_DEADLINE_S = 60.0
#: Root without the file-permission override, as the desktop's user meets permissions.
DROP_DAC = ("setpriv", "--bounding-set", "-dac_override,-dac_read_search")
TOKEN = "test-token-0123456789"


@dataclass(frozen=True)
class Guest:
    """A running guest server."""

    url: str
    token: str
    display: str
    home: Path


def _wait_healthy(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_DEADLINE_S
    request = urllib.request.Request(url + "/healthz", headers={"Authorization": f"Bearer {TOKEN}"})
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"guest exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(request, timeout=2) as response:
                if json.load(response).get("status") == "ok":
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.05)
    pytest.fail(f"guest not healthy within {START_DEADLINE_S} s: {log.read_text()[-2000:]}")


@pytest.fixture(scope="module")
def guest(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Guest]:
    if shutil.which("Xvfb") is None:
        pytest.skip("Xvfb is not installed (apt-get install xvfb)")
    tmp = tmp_path_factory.mktemp("guest")
    procs: list[subprocess.Popen[bytes]] = []
    try:
        xvfb, display = start_xvfb(tmp / "xvfb.log")
        procs.append(xvfb)
        home = tmp / "home"
        home.mkdir()
        # Own HOME: single-instance apps (LibreOffice) must not hand files to another display.
        env = {**os.environ, "DISPLAY": display, "HOME": str(home)}
        env.pop("CUA_GUEST_TOKEN", None)
        if shutil.which("openbox"):
            procs.append(
                subprocess.Popen(
                    ["openbox"],
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )
        token_file = tmp / "token"
        token_file.write_text(TOKEN + "\n")
        port = free_port()
        log = tmp / "guest.log"
        # A private D-Bus session, when available, lets /accessibility reach AT-SPI.
        session = ["dbus-run-session", "--"] if shutil.which("dbus-run-session") else []
        server = subprocess.Popen(
            [
                *session,
                sys.executable,
                "-m",
                "cua_guest",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--token-file",
                str(token_file),
                "--act-timeout",
                "10",
            ],
            env=env,
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        procs.append(server)
        url = f"http://127.0.0.1:{port}"
        _wait_healthy(url, server, log)
        yield Guest(url=url, token=TOKEN, display=display, home=tmp)
    finally:
        for proc in reversed(procs):
            kill_group(proc)


@pytest.fixture
async def client(guest: Guest) -> AsyncIterator[aiohttp.ClientSession]:
    """An authenticated session against the module's guest server."""
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(
        base_url=guest.url, headers={"Authorization": f"Bearer {guest.token}"}, timeout=timeout
    ) as session:
        yield session


@pytest.fixture
async def anon(guest: Guest) -> AsyncIterator[aiohttp.ClientSession]:
    """A session without credentials."""
    async with aiohttp.ClientSession(base_url=guest.url) as session:
        yield session


@pytest.fixture(scope="package")
def osw_guest(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGuest]:
    """A guest with a 1 MiB upload limit and no permission override, for the protocol
    and robustness tests (one per package run: starting one costs seconds)."""
    prefix = DROP_DAC if shutil.which("setpriv") else ()
    with running_guest(
        tmp_path_factory.mktemp("osworld-routes"),
        args=("--max-upload-bytes", str(OSW_UPLOAD_LIMIT), "--record-fps", "10"),
        prefix=prefix,
    ) as running:
        (running.tmp / "home" / "Desktop").mkdir()
        yield running


@pytest.fixture
async def osw(osw_guest: RunningGuest) -> AsyncIterator[OSWorldProtocol]:
    """OSWorld's protocol, as its host controller speaks it, against `osw_guest`."""
    async with OSWorldProtocol(osw_guest.url, osw_guest.token) as client:
        yield client
