"""A bare Xvfb display for tests that run the guest server without a provider."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

import pytest


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL a process started with `start_new_session` and all it spawned."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


def start_xvfb(
    log: Path, size: tuple[int, int] = (1920, 1080)
) -> tuple[subprocess.Popen[bytes], str]:
    """Xvfb picks a free display itself (-displayfd) and reports it once it accepts
    connections, so parallel runs never collide and no sleep is needed."""
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen(
        [
            "Xvfb",
            "-displayfd",
            str(write_fd),
            "-screen",
            "0",
            f"{size[0]}x{size[1]}x24",
            "-nolisten",
            "tcp",
        ],
        pass_fds=(write_fd,),
        stdout=subprocess.DEVNULL,
        stderr=log.open("wb"),
        start_new_session=True,
    )
    os.close(write_fd)
    with os.fdopen(read_fd) as pipe:
        number = pipe.readline().strip()  # blocks until Xvfb is accepting connections
    if not number:
        kill_group(proc)
        pytest.fail(f"Xvfb did not report a display number; see {log}")
    return proc, f":{number}"
