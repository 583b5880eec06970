"""Start a real guest server (`python -m cua_guest`) on a real Xvfb desktop for tests.

Unlike the shared module fixture in tests/integration/guest/conftest.py, this one
takes guest options (limits, TLS) and a launcher prefix (e.g. `setpriv` to drop
root's file-permission override, so permission errors can happen as they do for
the desktop's unprivileged user). Readiness is polled against a deadline.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests_support.servers import free_port
from tests_support.xvfb import kill_group, start_xvfb

START_DEADLINE_S = 60.0
TOKEN = "guest-test-token-0123456789"
#: --max-upload-bytes of the guest the protocol tests share (small: 413 is cheap to hit).
OSW_UPLOAD_LIMIT = 1 << 20


@dataclass(frozen=True)
class RunningGuest:
    url: str
    token: str
    display: str
    tmp: Path
    log: Path


def _probe(url: str, context: ssl.SSLContext | None, token: str = TOKEN) -> bool:
    request = urllib.request.Request(url + "/healthz", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=2, context=context) as response:
            return response.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError, ssl.SSLError):
        return False


@contextlib.contextmanager
def running_guest(
    tmp: Path,
    *,
    args: tuple[str, ...] = (),
    prefix: tuple[str, ...] = (),
    scheme: str = "http",
    size: tuple[int, int] = (1920, 1080),
    token: str = TOKEN,
) -> Iterator[RunningGuest]:
    """Xvfb (+ openbox when installed) and a guest with `args` and bearer `token`;
    everything killed after."""
    if shutil.which("Xvfb") is None:
        pytest.skip("Xvfb is not installed (apt-get install xvfb)")
    procs: list[subprocess.Popen[bytes]] = []
    try:
        xvfb, display = start_xvfb(tmp / "xvfb.log", size)
        procs.append(xvfb)
        home = tmp / "home"
        home.mkdir(exist_ok=True)
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
        token_file.write_text(token + "\n")
        port = free_port()
        log = tmp / "guest.log"
        server = subprocess.Popen(
            [
                *prefix,
                sys.executable,
                "-m",
                "cua_guest",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--token-file",
                str(token_file),
                *args,
            ],
            env=env,
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        procs.append(server)
        url = f"{scheme}://127.0.0.1:{port}"
        context = None
        if scheme == "https":
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        deadline = time.monotonic() + START_DEADLINE_S
        while not _probe(url, context, token):
            if server.poll() is not None:
                pytest.fail(f"guest exited with {server.returncode}: {log.read_text()[-2000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"guest not healthy in {START_DEADLINE_S} s: {log.read_text()[-2000:]}")
            time.sleep(0.05)
        yield RunningGuest(url=url, token=token, display=display, tmp=tmp, log=log)
    finally:
        for proc in reversed(procs):
            kill_group(proc)
