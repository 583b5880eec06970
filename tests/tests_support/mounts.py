"""Small tmpfs mounts that make the kernel refuse writes for real (ENOSPC, EROFS).

Root ignores file modes, so a read-only or full disk cannot be faked with chmod;
a tmpfs mounted read-only, or with a few KB and filled, gives the real errors.
Tests skip with the reason where mounting is not allowed (no CAP_SYS_ADMIN).
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def tmpfs(path: Path, options: str) -> Iterator[Path]:
    """`path` as a tmpfs mounted with `options` (e.g. `ro` or `size=64k`)."""
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(path: Path) -> None:
    """Write into `path` until its file system is full."""
    with contextlib.suppress(OSError), open(path / "filler", "wb") as out:
        for _ in range(100_000):  # bounded: 400 MB at most
            out.write(b"\0" * 4096)
            out.flush()
