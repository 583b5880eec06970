"""Processes that carry a mark in their environment: every process the check's owner
starts inherits the mark, so whatever of it outlives the owner is found without the
provider's help (a provider that leaks a process would not report it itself)."""

from __future__ import annotations

import os
import signal
from pathlib import Path


def marked(env_name: str, mark: str) -> list[int]:
    """Pids of live (non-zombie) processes with `env_name=mark` in their environment."""
    needle = f"{env_name}={mark}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state not in ("Z", "X"):
            found.append(int(entry.name))
    return sorted(found)


def describe(pid: int) -> str:
    """`pid (command line)`, for a failure line."""
    try:
        cmd = (
            Path(f"/proc/{pid}/cmdline")
            .read_bytes()
            .replace(b"\0", b" ")
            .decode(errors="replace")
            .strip()
        )
    except OSError:
        cmd = "?"
    return f"{pid} ({cmd[:80]})"


def kill_all(pids: list[int]) -> None:
    """SIGKILL what the check found leaked, so the check itself leaves nothing."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
