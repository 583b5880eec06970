"""The minimal desktop image for container and qemu tests, built once per
machine (cached by content hash, so later sessions reuse it), and a Docker
engine to run it on."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ENGINE_DEADLINE_S = 30.0


def engine_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return (
            subprocess.run(
                ["docker", "version", "--format", "{{.Server.Version}}"],
                capture_output=True,
                timeout=10,
            ).returncode
            == 0
        )
    except subprocess.TimeoutExpired:
        return False


@contextmanager
def docker_engine(log_path: Path) -> Iterator[str | None]:
    """Yields None when a Docker engine answers (one already running, or one we
    start: no bridge network, so containers can only be `--network none`), else
    the reason why not. An engine we started is stopped on exit."""
    if engine_answers():
        yield None
        return
    if shutil.which("dockerd") is None or shutil.which("docker") is None:
        yield "no Docker engine: apt-get install docker.io (./setup.sh)"
        return
    if os.geteuid() != 0:
        yield "no running Docker engine and not root to start dockerd"
        return
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            ["dockerd", "--bridge=none", "--iptables=false", "--ip6tables=false"],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + ENGINE_DEADLINE_S
        while not engine_answers():
            if proc.poll() is not None or time.monotonic() > deadline:
                yield f"dockerd did not start (see {log_path})"
                return
            time.sleep(0.2)
        yield None
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


def image_build_unavailable() -> str | None:
    """Why the minimal image cannot be built here, or None."""
    missing = [t for t in ("mmdebstrap", "tar") if shutil.which(t) is None]
    if missing:
        return f"image build tools missing: {', '.join(missing)} (./setup.sh)"
    return None
