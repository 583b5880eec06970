"""Keeping the run store's WAL small over a long run.

SQLite checkpoints the WAL into the database by itself (every 1,000 pages, PASSIVE),
but a PASSIVE checkpoint never waits for readers and the WAL file never shrinks: a
reader that holds a snapshot for a while (the viewer, `runs show`, a soak's sampler)
leaves a large WAL behind for the rest of the run. So the writer also checkpoints
with TRUNCATE after every policy update (store/upkeep.py), and `journal_size_limit`
cuts a WAL left larger than the limit after any later checkpoint.
"""

from __future__ import annotations

import sqlite3

BUSY_WAIT_MS = 2000
"""How long the checkpoint waits for readers (the store's own busy wait is 30 s)."""
STORE_BUSY_MS = 30000


def checkpoint_wal(db: sqlite3.Connection, limit_bytes: int) -> tuple[int, int, int]:
    """`wal_checkpoint(TRUNCATE)` on the writer's connection, waiting at most
    `BUSY_WAIT_MS` for readers. Returns SQLite's (busy, WAL frames, frames copied):
    busy 1 means a reader kept it from finishing; the next update tries again."""
    db.execute(f"PRAGMA journal_size_limit = {int(limit_bytes)}")
    db.execute(f"PRAGMA busy_timeout = {BUSY_WAIT_MS}")
    try:
        busy, frames, copied = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    finally:
        db.execute(f"PRAGMA busy_timeout = {STORE_BUSY_MS}")
    return busy, frames, copied
