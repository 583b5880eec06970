"""The run store for asyncio code: `AsyncRunStore` runs the synchronous `RunStore`
(store/run_store.py) on one dedicated thread, so the event loop never blocks on disk
and the writes of one process are serialized; it batches the verdicts that arrive in
the same loop tick into one transaction.

It is apart from store/run_store.py, which owns the SQLite database and the
screenshot files: this module only decides on which thread each call runs (and turns
SQLite's own errors into StoreError), and the fleet, the judge and the learners use
the store through it.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from cua_rl.errors import StoreError
from cua_rl.store.run_store import DB_NAME, RunStore
from cua_rl.types import StepVerdict, TaskVariant, Trajectory

T = TypeVar("T")


class AsyncRunStore:
    """`RunStore` for asyncio code: every call runs on the store's own thread."""

    def __init__(self, store: RunStore) -> None:
        self.sync = store
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="run-store")
        self._verdicts: list[StepVerdict] = []
        self._verdicts_written: asyncio.Future[None] | None = None

    @classmethod
    def open(cls, run_dir: str | Path, run_id: str | None = None) -> AsyncRunStore:
        return cls(RunStore(run_dir, run_id))

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run `fn` on the store thread; SQLite's own errors (disk full, read-only,
        locked past the busy timeout) become StoreError naming the database."""
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, lambda: fn(*args, **kwargs))
        except sqlite3.OperationalError as exc:
            if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
                raise StoreError(
                    f"{self.sync.run_dir / DB_NAME}: no space left on device (SQLite: {exc})"
                ) from exc
            raise StoreError(f"{self.sync.run_dir / DB_NAME}: {exc}") from exc

    async def put_screenshot(self, data: bytes) -> str:
        # A file write, not a SQLite one: keep it off the store thread so screenshots
        # never queue behind verdict writes.
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, self.sync.put_screenshot, data)

    async def save_trajectory(self, traj: Trajectory, **kwargs: Any) -> None:
        await self.call(self.sync.save_trajectory, traj, **kwargs)

    async def save_verdict(self, verdict: StepVerdict) -> None:
        """Stored once this returns; verdicts arriving in the same loop tick share
        one transaction (one per verdict was a tenth of the fleet's CPU)."""
        self._verdicts.append(verdict)
        if len(self._verdicts) == 1:
            self._verdicts_written = asyncio.ensure_future(self._write_verdicts())
        assert self._verdicts_written is not None
        await asyncio.shield(self._verdicts_written)

    async def _write_verdicts(self) -> None:
        await asyncio.sleep(0)  # let the verdicts of this tick join the batch
        batch, self._verdicts = self._verdicts, []
        await self.call(self.sync.save_verdicts, batch)

    async def incr(self, name: str, by: float = 1) -> None:
        await self.call(self.sync.incr, name, by)

    # The rest of RunStore's API, on the store thread, so callers never reach into
    # `sync` (which would run SQLite on the event loop).
    async def save_config(self, config: dict[str, Any]) -> None:
        await self.call(self.sync.save_config, config)

    async def add_variant(self, variant: TaskVariant) -> None:
        await self.call(self.sync.add_variant, variant)

    async def set_counter(self, name: str, value: float) -> None:
        await self.call(self.sync.set_counter, name, value)

    async def add_event(self, kind: str, subject: str, data: dict[str, Any]) -> None:
        await self.call(self.sync.add_event, kind, subject, data)

    async def counters(self) -> dict[str, float]:
        return await self.call(self.sync.counters)

    async def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        return await self.call(self.sync.events, kind)

    async def summary(self) -> dict[str, Any]:
        return await self.call(self.sync.summary)

    async def load_verdicts(self, trajectory_id: str) -> list[StepVerdict]:
        return await self.call(self.sync.load_verdicts, trajectory_id)

    async def load_trajectory(self, trajectory_id: str) -> Trajectory:
        return await self.call(self.sync.load_trajectory, trajectory_id)

    def screenshot_path(self, name: str) -> Path:
        """Where a stored screenshot's file is (a path, no I/O)."""
        return self.sync.screenshot_path(name)

    @property
    def run_dir(self) -> Path:
        """The run directory (a path, no I/O)."""
        return self.sync.run_dir

    async def close(self) -> None:
        await self.call(self.sync.close)
        self._executor.shutdown(wait=True)
