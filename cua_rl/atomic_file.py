"""Whole-file writes that readers never see half of, safe between threads.

A temporary name built from the process id alone is shared by every thread of that
process: two desktops starting at once in one run (`asyncio.to_thread`) wrote the
same temporary file, and the second rename found it gone. `tempfile.mkstemp` gives
each writer its own name in the target's directory, so `os.replace` stays atomic.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_bytes_atomic(target: Path, data: bytes, mode: int = 0o644) -> None:
    """Write `data` to `target` through a private temporary file and one rename.
    `mode`: the file's permissions; 0644 by default, what a plain write gives under
    the usual umask (mkstemp alone would leave a manifest readable by its owner only)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    finally:
        Path(tmp).unlink(missing_ok=True)


def write_text_atomic(target: Path, text: str, mode: int = 0o644) -> None:
    """`write_bytes_atomic` for UTF-8 text."""
    write_bytes_atomic(target, text.encode(), mode)
