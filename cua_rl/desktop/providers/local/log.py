"""The host's session log of a local desktop: written only by its launcher, capped.

Nothing the desktop runs holds a descriptor of a host file: the sandbox's
stdout/stderr is a pipe the launcher drains (`copy_capped`), copying at most
`DESKTOP_OUTPUT_CAP` bytes of it per start, made printable (`sanitize`), and
dropping the rest; the provider trims the file to `LOG_KEEP` bytes before every
start (`trim_log`), so the log stays under `LOG_KEEP + DESKTOP_OUTPUT_CAP` plus
the launcher's own few lines. Error messages quote it only through `tail`, which
sanitizes and caps again. Stdlib only: the launcher imports it on every start.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import BinaryIO

DESKTOP_OUTPUT_CAP = 256 << 10
"""Bytes of the desktop's own output (Xvfb, the session bus, the guest's warnings)
copied into the host log per start: a few screens of start-up errors, never a flood."""
LOG_KEEP = 1 << 20
"""The session log is trimmed to its last this-many bytes before each start."""
QUOTE_CAP = 3000
"""At most this many characters of the log go into an error message."""
_UNPRINTABLE = re.compile(r"[^\t\n\x20-\x7e]")
_CHUNK = 1 << 16


def sanitize(text: str) -> str:
    """Printable ASCII, tabs and newlines only: no terminal escapes, no NULs, no
    look-alike characters from the desktop in the host's log or messages."""
    return _UNPRINTABLE.sub("?", text)


def copy_capped(
    read_fd: int, sink: BinaryIO, cap: int = DESKTOP_OUTPUT_CAP, label: str = "desktop"
) -> int:
    """Copy the pipe `read_fd` into `sink` up to `cap` bytes (sanitized), then drain
    and drop the rest until EOF, so writers inside never block on a full pipe.
    Returns the number of bytes dropped (also noted once in the log)."""
    copied = dropped = 0
    with os.fdopen(read_fd, "rb", buffering=0) as pipe:
        while chunk := pipe.read(_CHUNK):
            room = max(cap - copied, 0)
            if room:
                part = chunk[:room]
                sink.write(sanitize(part.decode("utf-8", "replace")).encode())
                sink.flush()
                copied += len(part)
            if len(chunk) > room:
                if not dropped:
                    sink.write(
                        f"\n[{label}] output over {cap} bytes: the rest of this "
                        "start's output is dropped\n".encode()
                    )
                    sink.flush()
                dropped += len(chunk) - room
    return dropped


def trim_log(path: Path, keep: int = LOG_KEEP) -> None:
    """Cut the log to its last `keep` bytes (at a line start) if it grew beyond it."""
    try:
        size = path.stat().st_size
        if size <= keep:
            return
        with open(path, "rb") as fh:
            fh.seek(size - keep)
            data = fh.read(keep)
    except OSError:
        return
    cut = data.find(b"\n")
    data = data[cut + 1 :] if 0 <= cut < len(data) - 1 else data
    tmp = path.with_name(path.name + ".trim")
    tmp.write_bytes(b"[log trimmed to its last part]\n" + data)
    os.replace(tmp, path)


def tail(path: Path, size: int = QUOTE_CAP, start: int = 0) -> str:
    """The last `size` characters of the log from byte `start` on (one launch's
    part), sanitized: what an error message may quote."""
    size = min(size, QUOTE_CAP * 8)
    try:
        with open(path, "rb") as fh:
            end = fh.seek(0, os.SEEK_END)
            fh.seek(max(start, end - size))
            data = fh.read(size)
    except OSError:
        return "(no log)"
    return sanitize(data.decode("utf-8", "replace"))[-size:]
