"""A group's task set up once and forked to its rollouts (`fleet.fork_groups`).

The first rollout of a group to start is the setter: its desktop is reset and set up
(or comes set up as a spare), then the provider saves its whole state as a fork point
(`DesktopProvider.save_fork`: for qemu the VM's memory and devices plus a frozen copy
of its disk) and the host-side files the setup wrote (execute steps' output, read
back by evaluators) are kept beside it. Every rollout of the group, the setter's
included, then starts from a restore of that point, so all of them see the same
first screen and the same state an evaluator reads, exactly what the one setup left.

Where the provider cannot hold a desktop's whole state (`fork_support`) or the task's
setup is not deterministic (`desktop/fork_safety.py`), the group sets up per rollout
as without forks (the reason is logged once per task). A setter whose setup or save
fails aborts its own episode as a setup would; the group's other rollouts then set up
themselves. A group's fork point is deleted once the group is emitted.
"""

from __future__ import annotations

import asyncio
import logging
import re
import secrets
import shutil
from collections import Counter
from pathlib import Path

from cua_rl import spans
from cua_rl.desktop.fork_safety import setup_not_forkable
from cua_rl.desktop.pool import DesktopPool
from cua_rl.rollout.prepared import PreparedDesktop, SavedSetup
from cua_rl.types import TaskVariant

log = logging.getLogger(__name__)


class GroupForks:
    """Fork points of the groups in flight, one per group, made by its first rollout."""

    def __init__(self, pool: DesktopPool, root: Path) -> None:
        self.pool = pool
        self.root = root
        self._groups: dict[str, asyncio.Future[SavedSetup | None]] = {}
        self._why_not: dict[str, str | None] = {}
        self._dropping: set[asyncio.Task[None]] = set()
        self.counts: Counter[str] = Counter()
        """fork_saved, fork_restored, fork_fallbacks (a group that set up per rollout
        after its save failed), fork_not_applicable (rollouts of tasks that set up
        per rollout)."""

    def applies(self, variant: TaskVariant) -> bool:
        """Whether `variant`'s groups fork (the provider can, its setup is deterministic)."""
        if variant.variant_id not in self._why_not:
            why = self.pool.provider.fork_support() or setup_not_forkable(
                variant.task_id, variant.config
            )
            self._why_not[variant.variant_id] = why
            if why is not None:
                log.info("fork_groups: %s sets up per rollout: %s", variant.variant_id, why)
        return self._why_not[variant.variant_id] is None

    def reason(self, variant: TaskVariant) -> str | None:
        self.applies(variant)
        return self._why_not[variant.variant_id]

    def has_point(self, group_id: str) -> bool:
        future = self._groups.get(group_id)
        return future is not None and future.done() and future.result() is not None

    async def start(self, desktop: PreparedDesktop, group_id: str, variant: TaskVariant) -> None:
        """Bring `desktop` to the group's saved setup, making it first if nobody has."""
        future = self._groups.get(group_id)
        if future is None:
            future = self._groups[group_id] = asyncio.get_running_loop().create_future()
            try:
                saved = await self._save(desktop, group_id, variant)
            except BaseException:
                if not future.done():
                    self.counts["fork_fallbacks"] += 1
                    future.set_result(None)  # the others set up per rollout
                raise
            future.set_result(saved)
            await desktop.restore(saved)
            self.counts["fork_restored"] += 1
            return
        saved = await asyncio.shield(future)
        if saved is None:
            if desktop.prepared_for != variant.variant_id:
                await desktop.setup(variant)
        elif desktop.prepared_for != variant.variant_id:  # a spare set up for it is as good
            await desktop.restore(saved)
            self.counts["fork_restored"] += 1

    async def _save(
        self, desktop: PreparedDesktop, group_id: str, variant: TaskVariant
    ) -> SavedSetup:
        if desktop.prepared_for != variant.variant_id:
            await desktop.setup(variant)
        context = desktop.saved_context()
        assert desktop.work_dir is not None and context is not None
        name = f"g-{re.sub(r'[^A-Za-z0-9_-]', '', group_id)[:40]}-{secrets.token_hex(3)}"
        with spans.span("fork_save", desktop=desktop.handle.id, group=group_id):
            point = await self.pool.save_fork(desktop.handle, name)
        files = self.root / name
        try:
            await asyncio.to_thread(shutil.copytree, desktop.work_dir, files)
        except BaseException:
            await self.pool.provider.drop_fork(point)
            raise
        desktop.discard_work()
        self.counts["fork_saved"] += 1
        return SavedSetup(
            point, files, context, desktop.screen, desktop.settled, variant.variant_id
        )

    def done(self, group_id: str) -> None:
        """The group was emitted: delete its fork point (in the background)."""
        future = self._groups.pop(group_id, None)
        if future is None or not future.done() or future.result() is None:
            return
        task = asyncio.get_running_loop().create_task(self._drop(future.result()))
        self._dropping.add(task)
        task.add_done_callback(self._dropping.discard)

    async def _drop(self, saved: SavedSetup | None) -> None:
        if saved is None:
            return
        try:
            await self.pool.provider.drop_fork(saved.point)
        except Exception as exc:  # a leftover costs disk, never a run
            log.warning("fork point %s: could not delete it: %s", saved.point.name, exc)
        await asyncio.to_thread(shutil.rmtree, saved.files, True)

    async def close(self) -> None:
        """Delete every fork point left (the run is over)."""
        for group_id in list(self._groups):
            self.done(group_id)
        if self._dropping:
            await asyncio.gather(*self._dropping, return_exceptions=True)
