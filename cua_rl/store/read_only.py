"""Opening a run store to read it without leaving anything behind.

A run store is SQLite in WAL mode. SQLite's `mode=ro` still needs the `-wal` and
`-shm` side files of a WAL database, creates them when they are missing, and being
read-only cannot remove them when it closes: `runs show` or `export` on a finished
run left `run.sqlite-wal` and `run.sqlite-shm` in a directory whose store they never
wrote. So readers choose by what is there:

- no `-wal` file: nobody writes the store now (a writer holds it from its first
  write to its close, which checkpoints and removes it), and everything is in the
  main file. It is opened `immutable=1`: no locks, no side files;
- a `-wal` file: a live run, or one that was killed. Its latest rows are in that
  file, so the store is opened `mode=ro`, which reads them through the side files
  that are there already.

An immutable connection does not see later writes: a reader that lives on (the
viewer) takes a `Snapshot` when it opens and asks `Snapshot.stale` before each use.
It opens again once a writer has started (the WAL file appeared) or has come and
gone between two uses (the main file changed: a writer's close checkpoints its rows
into it).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def wal_path(db: Path) -> Path:
    """The WAL file beside the store `db`."""
    return db.with_name(db.name + "-wal")


def connect_read_only(db: Path, **kwargs: Any) -> sqlite3.Connection:
    """A connection to the store file `db` that can only read it and creates no file
    (module doc); `kwargs` go to `sqlite3.connect`. `query_only` is on as well."""
    mode = "mode=ro" if wal_path(db).exists() else "immutable=1"
    conn = sqlite3.connect(f"{db.resolve().as_uri()}?{mode}", uri=True, **kwargs)
    conn.execute("PRAGMA query_only=ON")
    return conn


def immutable(db: Path) -> bool:
    """Whether `connect_read_only(db)` would open `db` immutable now."""
    return not wal_path(db).exists()


def _signature(db: Path) -> tuple[int, int, int] | None:
    try:
        st = db.stat()
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What a reader's connection saw of the store file when it was opened."""

    immutable: bool
    signature: tuple[int, int, int] | None

    @classmethod
    def take(cls, db: Path) -> Snapshot:
        """Taken just before `connect_read_only(db)`, so a write in between makes it
        stale rather than lost."""
        return cls(immutable(db), _signature(db))

    def stale(self, db: Path) -> bool:
        """True when a connection opened immutable must be opened again: a writer
        has started since (its WAL file appeared) or wrote and closed (the main file
        changed). A `mode=ro` connection reads later writes itself."""
        return self.immutable and (not immutable(db) or _signature(db) != self.signature)
