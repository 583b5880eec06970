"""The votes `cua-rl eval-prm` has already asked for, kept in its output directory.

Asking a reward model (or an 8-vote labelling judge) about every step of a
held-out set costs minutes to hours; a rerun, a second report or a run that was
interrupted must not pay again. Every step's votes are written to
`OUT/votes.sqlite` as soon as its answer arrives, keyed by

- the voter: a hash of who answered and how (the model's identity, m, the
  temperature, the token budget, the prompt's text), whose readable identity is
  kept in the `voters` table,
- the run id of the scored run and the trajectory id and step index,

so a rerun with the same voter reads them, and asks only for the steps that
have none (never answered, or whose request failed). A different model or vote
setting is another voter: its votes never mix with these.

SQLite calls run on one worker thread (`AsyncVoteCache`), never in the event loop.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from cua_rl.errors import StoreError

T = TypeVar("T")

CACHE_NAME = "votes.sqlite"

SCHEMA = """
CREATE TABLE IF NOT EXISTS voters (
    voter_key TEXT PRIMARY KEY,
    identity_json TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS step_votes (
    voter_key TEXT NOT NULL,
    run_id TEXT NOT NULL,
    trajectory_id TEXT NOT NULL,
    step_index INTEGER NOT NULL,
    scores_json TEXT NOT NULL,
    texts_json TEXT NOT NULL,
    majority INTEGER,
    created_at REAL NOT NULL,
    PRIMARY KEY (voter_key, run_id, trajectory_id, step_index)
);
"""
# step_votes.majority: the sign of the votes' mean (+1, -1), NULL on a tie or when no
# vote parsed: the judged model's verdict, or the labelling judge's label.


def voter_key(identity: dict[str, Any]) -> str:
    """A stable key of a voter's identity (sorted JSON, hashed)."""
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:24]


@dataclass(frozen=True, slots=True)
class CachedVotes:
    scores: tuple[int, ...]
    texts: tuple[str, ...]


StepKey = tuple[str, int]
"""(trajectory id, step index)."""


class VoteCache:
    """`OUT/votes.sqlite` (see module doc); synchronous core."""

    def __init__(self, out_dir: Path) -> None:
        self.path = out_dir / CACHE_NAME
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(
                self.path, timeout=30.0, isolation_level=None, check_same_thread=False
            )
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.executescript(SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: not a vote cache cua-rl can open ({exc})") from None

    def register(self, identity: dict[str, Any]) -> str:
        """The key of `identity`, recorded with it; returns the key."""
        key = voter_key(identity)
        self._db.execute(
            "INSERT OR IGNORE INTO voters VALUES (?, ?, ?)",
            (key, json.dumps(identity, sort_keys=True), time.time()),
        )
        return key

    def load(self, key: str, run_id: str) -> dict[StepKey, CachedVotes]:
        """Every step of `run_id` this voter has answered. A row that does not hold
        what this module writes is skipped (asked again), not trusted."""
        rows = self._db.execute(
            "SELECT trajectory_id, step_index, scores_json, texts_json FROM step_votes "
            "WHERE voter_key = ? AND run_id = ?",
            (key, run_id),
        ).fetchall()
        out: dict[StepKey, CachedVotes] = {}
        for tid, index, scores_json, texts_json in rows:
            try:
                scores, texts = json.loads(scores_json), json.loads(texts_json)
            except json.JSONDecodeError:
                continue
            if (
                isinstance(scores, list)
                and isinstance(texts, list)
                and len(scores) == len(texts)
                and all(s in (-1, 0, 1) and not isinstance(s, bool) for s in scores)
                and all(isinstance(t, str) for t in texts)
            ):
                out[(tid, index)] = CachedVotes(tuple(scores), tuple(texts))
        return out

    def put(
        self, key: str, run_id: str, step: StepKey, votes: CachedVotes, majority: int | None
    ) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO step_votes VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                key,
                run_id,
                step[0],
                step[1],
                json.dumps(list(votes.scores)),
                json.dumps(list(votes.texts)),
                majority,
                time.time(),
            ),
        )

    def close(self) -> None:
        self._db.close()


class AsyncVoteCache:
    """`VoteCache` on its own thread: the event loop never waits on SQLite."""

    def __init__(self, cache: VoteCache) -> None:
        self.sync = cache
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vote-cache")

    @classmethod
    async def open(cls, out_dir: Path) -> AsyncVoteCache:
        loop = asyncio.get_running_loop()
        return cls(await loop.run_in_executor(None, VoteCache, out_dir))

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, fn, *args)
        except sqlite3.Error as exc:
            raise StoreError(f"{self.sync.path}: {exc}") from exc

    async def register(self, identity: dict[str, Any]) -> str:
        return await self._call(self.sync.register, identity)

    async def load(self, key: str, run_id: str) -> dict[StepKey, CachedVotes]:
        return await self._call(self.sync.load, key, run_id)

    async def put(
        self, key: str, run_id: str, step: StepKey, votes: CachedVotes, majority: int | None
    ) -> None:
        await self._call(self.sync.put, key, run_id, step, votes, majority)

    async def close(self) -> None:
        await self._call(self.sync.close)
        self._executor.shutdown(wait=True)
