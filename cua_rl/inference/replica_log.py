"""A model-server replica's log file, kept to a size (`policy.log_max_mb`, `prm.log_max_mb`).

The server writes its stdout and stderr straight into `logs/<pool>-<i>.log` through a
descriptor opened with O_APPEND that it (and a vLLM engine core it starts) keeps for
its whole life. Rotating by renaming would leave it writing into the renamed file, and
routing its output through a reader in the run would tie the server's life to the
run's event loop (a stalled loop would block its writes). So the log is rotated by
copy and truncate, as logrotate's `copytruncate` does: the file is copied to
`<name>.1` (replacing the one before) and cut to zero; O_APPEND writes go on at the new
end, with no hole. The lines written between the copy and the cut are lost.

What readers rely on stays true: the log always names the port of the server's latest
start (`ReplicaLogs`, the soak's and fault benches' victim lookup), because the rotation
writes that start line back at the top of the new file; a reader that had read further
than the new size reads it again from the start.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

SERVER_START = re.compile(rb"(?:serving [^\n]*? on |server on http://)127\.0\.0\.1:(\d+)")
"""A server's start line names its address: hf's `hf engine serving MODEL on
127.0.0.1:P`, vLLM's `Starting vLLM server on http://127.0.0.1:P`."""
START_LINE = re.compile(rb"[^\n]*" + SERVER_START.pattern + rb"[^\n]*")
LOG_BYTES = 32 * 1024 * 1024
"""Default size at which a replica log rotates (`ModelServersConfig.log_max_mb`)."""
LATEST = b"; latest start: "
ROTATE_EVERY_S = 30.0
"""How often a running server's log size is looked at."""


def rotate_replica_log(path: Path, max_bytes: int) -> bool:
    """Copy-truncate `path` if it reached `max_bytes`; whether it did. The new file
    starts with one line that carries the latest start line of the old one (second,
    after a line the server appended between the truncate and the note: the reader
    looks for it in every line)."""
    try:
        if path.stat().st_size < max_bytes:
            return False
        data = path.read_bytes()
    except FileNotFoundError:
        return False
    starts = [m.group(0) for m in START_LINE.finditer(data)]
    backup = path.with_name(path.name + ".1")
    backup.write_bytes(data)  # the bytes just read: the log is read once
    with path.open("r+b") as log:
        log.truncate(0)
    note = (
        f"[cua-rl {time.strftime('%Y-%m-%d %H:%M:%S')}] log rotated at "
        f"{max_bytes / 1e6:.0f} MB; earlier output in {backup.name}"
    ).encode()
    if starts:  # after an earlier rotation the latest start is in that one's note
        note += LATEST + starts[-1].rsplit(LATEST, 1)[-1].strip()
    with path.open("ab") as log:
        log.write(note + b"\n")
    return True
