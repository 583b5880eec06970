"""The run store: SQLite (WAL) plus screenshot files named by content hash.

`RunStore` is the synchronous core; `AsyncRunStore` (store/async_run_store.py) runs
it on one dedicated thread so the event loop never blocks on disk and writes from one
process are serialized. Several processes of the same run may write at once: WAL mode
and a busy timeout make SQLite queue them. Writes are idempotent by primary key, so a
trajectory saved twice (e.g. after a resume) is stored once.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from cua_rl.errors import StoreError, naming_path
from cua_rl.store.codec import step_from_row, step_to_row
from cua_rl.store.read_only import connect_read_only
from cua_rl.store.schema import SCHEMA, SCHEMA_VERSION
from cua_rl.types import StepVerdict, TaskVariant, Trajectory, TrajectoryStatus, Vote

T = TypeVar("T")

DB_NAME = "run.sqlite"
SHOTS_DIR = "screenshots"
WAL_LIMIT_BYTES = 64 * 1024 * 1024
"""Default `journal_size_limit` (`StoreConfig.wal_limit_mb`)."""


def screenshot_hash(data: bytes) -> str:
    """Content hash + extension from the magic bytes, e.g. `3fa9...c1.png`."""
    ext = "png" if data[:8] == b"\x89PNG\r\n\x1a\n" else "jpg" if data[:2] == b"\xff\xd8" else "bin"
    return f"{hashlib.sha256(data).hexdigest()[:40]}.{ext}"


def unreadable(db: Path, exc: Exception) -> StoreError:
    """The one-line error for a store SQLite cannot read (corrupt, truncated, other)."""
    return StoreError(f"{db}: not a readable cua-rl run store ({exc})")


class RunStore:
    """One run directory. Open it again to continue a run."""

    def __init__(self, run_dir: str | Path, run_id: str | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / SHOTS_DIR).mkdir(exist_ok=True)
        db = self.run_dir / DB_NAME
        try:
            self._db = sqlite3.connect(
                db, timeout=30.0, isolation_level=None, check_same_thread=False
            )
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            # after a checkpoint, a WAL file beyond this is cut back (store.wal_limit_mb)
            self._db.execute(f"PRAGMA journal_size_limit = {WAL_LIMIT_BYTES}")
            self._db.executescript(SCHEMA)
            self._db.execute(
                "INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', ?)",
                (str(SCHEMA_VERSION),),
            )
            self.run_id = run_id or self._existing_run_id() or uuid.uuid4().hex[:12]
            self._db.execute(
                "INSERT OR IGNORE INTO runs(run_id, created_at) VALUES (?, ?)",
                (self.run_id, time.time()),
            )
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{db}: cannot open the run store for writing ({exc})") from None

    @classmethod
    def read_only(cls, run_dir: str | Path) -> RunStore:
        """Open an existing store for reading only (`runs show`, reports): looking at
        a run, even a live or damaged one, never changes it nor leaves a file beside
        it (`store.read_only`). A file that is not a readable run store raises
        StoreError naming it."""
        store = cls.__new__(cls)
        store.run_dir = Path(run_dir)
        db = store.run_dir / DB_NAME
        if not db.is_file():
            raise StoreError(f"{store.run_dir}: no {DB_NAME} here; is this a cua-rl run directory?")
        try:
            store._db = connect_read_only(
                db, timeout=30.0, isolation_level=None, check_same_thread=False
            )
            run_id = store._existing_run_id()
        except sqlite3.DatabaseError as exc:
            raise unreadable(db, exc) from None
        store.run_id = run_id or ""
        return store

    def _existing_run_id(self) -> str | None:
        row = self._db.execute("SELECT run_id FROM runs ORDER BY created_at LIMIT 1").fetchone()
        return row[0] if row else None

    def close(self) -> None:
        self._db.close()

    def query(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """`fn(connection)` outside a transaction: for modules that own their own
        tables and queries (`store/retention.py`)."""
        return fn(self._db)

    def transaction(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """`fn(connection)` in one write transaction."""
        return self._tx(fn)

    def _tx(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            out = fn(self._db)
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")
        return out

    # screenshots ---------------------------------------------------------------

    def put_screenshot(self, data: bytes) -> str:
        name = screenshot_hash(data)
        path = self.screenshot_path(name)
        try:  # already stored: touch it, so retention keeps it for this episode
            os.utime(path)
        except FileNotFoundError:
            path.parent.mkdir(exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.{uuid.uuid4().hex[:6]}.tmp")
            try:
                with naming_path(tmp):
                    tmp.write_bytes(data)
                os.replace(tmp, path)
            finally:
                tmp.unlink(missing_ok=True)
        return name

    def screenshot_path(self, name: str) -> Path:
        return self.run_dir / SHOTS_DIR / name[:2] / name

    # records -------------------------------------------------------------------

    def save_config(self, config: dict[str, Any]) -> None:
        self._db.execute(
            "UPDATE runs SET config_json = ? WHERE run_id = ?", (json.dumps(config), self.run_id)
        )

    def add_variant(self, variant: TaskVariant) -> None:
        self._db.execute(
            "INSERT OR IGNORE INTO variants VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                variant.variant_id,
                self.run_id,
                variant.task_id,
                variant.domain,
                variant.evaluator_name,
                variant.instruction,
                json.dumps(
                    {
                        "config": list(variant.config),
                        "evaluator": variant.evaluator,
                        "related_apps": list(variant.related_apps),
                        "snapshot": variant.snapshot,
                    }
                ),
                time.time(),
            ),
        )

    def save_trajectory(
        self, traj: Trajectory, *, group_id: str = "", error: str = "", started_at: float = 0.0
    ) -> None:
        """Store a trajectory and all its steps in one transaction."""

        def write(db: sqlite3.Connection) -> None:
            db.execute(
                "INSERT OR REPLACE INTO trajectories VALUES "
                "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    traj.id,
                    self.run_id,
                    traj.variant_id,
                    group_id,
                    str(traj.status),
                    traj.score,
                    traj.outcome,
                    traj.policy_version_at_start,
                    len(traj.steps),
                    *traj.screen,
                    error,
                    started_at or time.time(),
                    time.time(),
                ),
            )
            db.execute("DELETE FROM steps WHERE trajectory_id = ?", (traj.id,))
            db.executemany(
                "INSERT INTO steps VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(traj.id, s.index, self.run_id, *step_to_row(s)) for s in traj.steps],
            )

        self._tx(write)

    def save_verdict(self, verdict: StepVerdict) -> None:
        self.save_verdicts([verdict])

    def save_verdicts(self, verdicts: list[StepVerdict]) -> None:
        """Many verdicts in one transaction (the judge's writes come in bursts)."""
        rows = [
            (
                verdict.trajectory_id,
                verdict.step_index,
                i,
                self.run_id,
                v.score,
                v.text,
                json.dumps(list(v.token_ids)),
                json.dumps(list(v.logprobs)),
                verdict.prm_version,
            )
            for verdict in verdicts
            for i, v in enumerate(verdict.votes)
        ]
        self._tx(
            lambda db: db.executemany(
                "INSERT OR REPLACE INTO votes VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows
            )
        )

    def incr(self, name: str, by: float = 1) -> None:
        self._db.execute(
            "INSERT INTO counters(run_id, name, value) VALUES (?, ?, ?) "
            "ON CONFLICT(run_id, name) DO UPDATE SET value = value + excluded.value",
            (self.run_id, name, by),
        )

    def set_counter(self, name: str, value: float) -> None:
        """Absolute counters (e.g. updates = the learner's checkpointed version)
        stay right when a resumed run repeats work after its last checkpoint."""
        self._db.execute(
            "INSERT INTO counters(run_id, name, value) VALUES (?, ?, ?) "
            "ON CONFLICT(run_id, name) DO UPDATE SET value = excluded.value",
            (self.run_id, name, value),
        )

    def add_event(self, kind: str, subject: str, data: dict[str, Any]) -> None:
        self._db.execute(
            "INSERT INTO events(run_id, kind, subject, data_json, created_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (self.run_id, kind, subject, json.dumps(data), time.time()),
        )

    # reads ---------------------------------------------------------------------

    def counters(self) -> dict[str, float]:
        rows = self._db.execute("SELECT name, value FROM counters WHERE run_id = ?", (self.run_id,))
        return {name: value for name, value in rows}

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        sql = "SELECT kind, subject, data_json, created_at FROM events"
        rows = self._db.execute(
            sql + (" WHERE kind = ?" if kind else "") + " ORDER BY id", (kind,) if kind else ()
        )
        return [
            {"kind": k, "subject": s, "data": json.loads(d), "created_at": t} for k, s, d, t in rows
        ]

    def load_trajectory(self, trajectory_id: str) -> Trajectory:
        row = self._db.execute(
            "SELECT variant_id, status, score, policy_version_at_start, screen_w, screen_h "
            "FROM trajectories WHERE trajectory_id = ?",
            (trajectory_id,),
        ).fetchone()
        if row is None:
            raise KeyError(f"trajectory {trajectory_id!r} is not in {self.run_dir}")
        steps = self._db.execute(
            "SELECT step_index, screenshot_before, screenshot_after, response, actions_json, "
            "parse_error_json, code, token_ids_json, logprobs_json, policy_version, timings_json "
            "FROM steps WHERE trajectory_id = ? ORDER BY step_index",
            (trajectory_id,),
        ).fetchall()
        return Trajectory(
            id=trajectory_id,
            variant_id=row[0],
            status=TrajectoryStatus(row[1]),
            score=row[2],
            policy_version_at_start=row[3],
            screen=(row[4], row[5]),
            steps=tuple(step_from_row(r) for r in steps),
        )

    def load_verdicts(self, trajectory_id: str) -> list[StepVerdict]:
        rows = self._db.execute(
            "SELECT step_index, score, text, token_ids_json, logprobs_json, prm_version FROM votes "
            "WHERE trajectory_id = ? ORDER BY step_index, vote_index",
            (trajectory_id,),
        ).fetchall()
        by_step: dict[int, list[tuple[Any, ...]]] = {}
        for r in rows:
            by_step.setdefault(r[0], []).append(r)
        return [
            StepVerdict(
                trajectory_id=trajectory_id,
                step_index=idx,
                prm_version=votes[0][5],
                votes=tuple(
                    Vote(
                        score=v[1],
                        text=v[2],
                        token_ids=tuple(json.loads(v[3])),
                        logprobs=tuple(json.loads(v[4])),
                    )
                    for v in votes
                ),
            )
            for idx, votes in sorted(by_step.items())
        ]

    def trajectory_records(self) -> list[dict[str, Any]]:
        """Every trajectory's summary row (no steps), with its variant's task id and
        domain, oldest first: what reports aggregate without loading steps."""
        rows = self._db.execute(
            "SELECT t.trajectory_id, t.variant_id, t.group_id, t.status, t.score, t.n_steps, "
            "t.finished_at, v.task_id, v.domain, t.error, t.started_at FROM trajectories t "
            "LEFT JOIN variants v ON v.variant_id = t.variant_id ORDER BY t.finished_at"
        )
        keys = (
            "trajectory_id",
            "variant_id",
            "group_id",
            "status",
            "score",
            "n_steps",
            "finished_at",
            "task_id",
            "domain",
            "error",
            "started_at",
        )
        return [dict(zip(keys, row, strict=True)) for row in rows]

    def saved_config(self) -> str:
        """The run's config as `save_config` stored it (JSON text; '{}' when none was)."""
        row = self._db.execute(
            "SELECT config_json FROM runs WHERE run_id = ?", (self.run_id,)
        ).fetchone()
        return row[0] if row else "{}"

    def variant_rows(self) -> dict[str, dict[str, str]]:
        """variant id -> its task id, domain, evaluator name and instruction (what
        exports need to rebuild prompts without loading task specs)."""
        rows = self._db.execute(
            "SELECT variant_id, task_id, domain, evaluator_name, instruction FROM variants"
        )
        return {
            v: {"task_id": t, "domain": d, "evaluator": e, "instruction": i}
            for v, t, d, e, i in rows
        }

    def summary(self) -> dict[str, Any]:
        """What `cua-rl runs show` prints (see `store/run_summary.py`)."""
        from cua_rl.store.run_summary import summarize

        return summarize(self._db, self.run_id, self.counters(), self.events())
