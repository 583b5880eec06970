"""The run's own events in the store: when each invocation started and how it ended,
and the work it lost (give-ups, reward-model failures, set-aside task variants).

They are rows of the `events` table (every store since schema 1 has it), so
recording them needs no migration and older stores read as "kind unknown".
`run_lifecycle` wraps a command's run: a run killed with SIGKILL has a start and
no end, which is how `runs show` tells it never finished.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

from cua_rl.errors import StoreError
from cua_rl.store.schema import ENDED, FAILURE_KINDS, GAVE_UP, JUDGE_FAILURE, SET_ASIDE, STARTED  # noqa: F401 - the kinds are imported from here

log = logging.getLogger(__name__)


def _record(run_dir: Path, kind: str, data: dict[str, object]) -> None:
    """Append one lifecycle event; a store that cannot take it (full disk, read-only)
    is logged, never raised: the run's own error, if any, is the one to report."""
    from cua_rl.store.run_store import RunStore

    try:
        store = RunStore(run_dir)
    except (StoreError, OSError) as exc:
        log.warning("could not record %s in %s: %s", kind, run_dir, exc)
        return
    try:
        store.add_event(kind, store.run_id, data)
    except (sqlite3.Error, OSError) as exc:
        log.warning("could not record %s in %s: %s", kind, run_dir, exc)
    finally:
        store.close()


@contextlib.contextmanager
def run_lifecycle(run_dir: Path, kind: str) -> Iterator[None]:
    """Record the start of a `kind` run (train/rollout/eval) in `run_dir` and how it
    ended: `finished`, `interrupted` (Ctrl-C, SIGTERM) or `failed` with its reason.
    A run that fails before it wrote anything (a bad checkout, a bad task set) leaves
    no run directory behind when there was none before."""
    started = time.monotonic()
    fresh = not run_dir.exists()
    _record(run_dir, STARTED, {"kind": kind, "pid": os.getpid()})
    status, reason = "failed", ""
    try:
        yield
        status = "finished"
    except BaseException as exc:
        stopped = isinstance(exc, KeyboardInterrupt | asyncio.CancelledError) or getattr(
            exc, "interrupted", False
        )
        status = "interrupted" if stopped else "failed"
        reason = f"{type(exc).__name__}: {exc}"
        if fresh and not stopped and _only_our_events(run_dir):
            shutil.rmtree(run_dir, ignore_errors=True)
            status = ""
        raise
    finally:
        if status:
            _record(
                run_dir,
                ENDED,
                {
                    "kind": kind,
                    "status": status,
                    "reason": reason,
                    "wall_s": round(time.monotonic() - started, 1),
                },
            )


def _only_our_events(run_dir: Path) -> bool:
    """True when `run_dir` holds nothing but a store with no records besides events
    (what `run_lifecycle` itself created): the run never started."""
    from cua_rl.store.read_only import connect_read_only
    from cua_rl.store.run_store import DB_NAME, SHOTS_DIR

    names = {p.name for p in run_dir.iterdir()} if run_dir.is_dir() else set()
    if not names <= {DB_NAME, f"{DB_NAME}-wal", f"{DB_NAME}-shm", SHOTS_DIR}:
        return False
    if any((run_dir / SHOTS_DIR).iterdir()) if (run_dir / SHOTS_DIR).is_dir() else False:
        return False
    try:
        db = connect_read_only(run_dir / DB_NAME)
        try:
            rows = sum(
                db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
                for table in ("variants", "trajectories", "votes", "counters")
            )
        finally:
            db.close()
    except sqlite3.Error:
        return False
    return rows == 0
