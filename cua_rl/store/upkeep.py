"""The run store's upkeep after each policy update: WAL checkpoint and screenshot retention.

The group router calls `StoreUpkeep.routed` for every training group once its samples
are built; the first routing after the policy version changed runs one upkeep pass
(so at most one per update, from the one process that routes groups). A pass that
fails (disk, a locked store) is logged and skipped: upkeep never stops a run, and the
next update's pass does the work again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from functools import partial

from cua_rl.errors import StoreError
from cua_rl.store.async_run_store import AsyncRunStore
from cua_rl.store.config import StoreConfig
from cua_rl.store.retention import delete_screenshots, finish_pruning, mark_routed, plan_pruning
from cua_rl.store.run_store import SHOTS_DIR
from cua_rl.store.wal import checkpoint_wal

log = logging.getLogger(__name__)


class StoreUpkeep:
    """Counters: `screenshots_pruned`, `screenshot_bytes_pruned`, `wal_checkpoints_busy`."""

    def __init__(
        self,
        store: AsyncRunStore,
        cfg: StoreConfig,
        protected: Callable[[], frozenset[str]] = frozenset,
    ) -> None:
        """`protected`: trajectory ids whose screenshots must all stay (the success-
        replay buffer), asked at every pass."""
        self.store, self.cfg, self.protected = store, cfg, protected
        self._version = -1

    async def routed(self, group_id: str, version: int) -> None:
        """A training group's samples were built at policy `version`."""
        await self.store.call(
            self.store.sync.query, partial(mark_routed, group_id=group_id, version=version)
        )
        if version > self._version:
            self._version = version
            await self.after_update(version)

    async def after_update(self, version: int) -> None:
        """Checkpoint the WAL, then delete what retention allows at `version`."""
        try:
            busy, _, _ = await self.store.call(
                self.store.sync.query,
                partial(checkpoint_wal, limit_bytes=self.cfg.wal_limit_mb * 1024 * 1024),
            )
            if busy:
                await self.store.incr("wal_checkpoints_busy")
            if self.cfg.retention.enabled:
                await self.prune(version)
        except (StoreError, OSError) as exc:
            log.warning("store upkeep after policy update %d skipped: %s", version, exc)

    async def prune(self, version: int) -> tuple[int, int]:
        """One retention pass; (files, bytes) deleted."""
        plan = await self.store.call(
            self.store.sync.query,
            partial(
                plan_pruning,
                version=version,
                cfg=self.cfg.retention,
                protected=frozenset(self.protected()),
            ),
        )
        if not plan.groups and not plan.doomed:
            return 0, 0
        files, size = await asyncio.get_running_loop().run_in_executor(
            None, delete_screenshots, self.store.run_dir / SHOTS_DIR, plan.doomed
        )
        await self.store.call(self.store.sync.transaction, partial(finish_pruning, plan=plan))
        if files:
            await self.store.incr("screenshots_pruned", files)
            await self.store.incr("screenshot_bytes_pruned", size)
        log.info(
            "screenshot retention at policy update %d: %d group(s), %d file(s), %.1f MB deleted",
            version,
            len(plan.groups),
            files,
            size / 1e6,
        )
        return files, size
