"""Episodes on real desktops: a leased guest desktop as an `EpisodeDesktop`.

Every episode starts from a reset desktop (the pool's provider restores it),
runs the task's setup steps, and ends with OSWorld's evaluate(). Files the
evaluator fetches live in a per-episode work directory that is removed after
scoring, so long runs do not fill the disk.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

from cua_rl.desktop.client import GuestClient
from cua_rl.desktop.file_cache import FileCache
from cua_rl.desktop.pool import DesktopPool
from cua_rl.desktop.providers.base import DesktopHandle
from cua_rl.desktop.settle import OPENING_STEPS, Settled, wait_until_settled
from cua_rl.desktop.setup_steps import SetupContext, run_setup_steps
from cua_rl.errors import DesktopError, EpisodeAborted, GuestError
from cua_rl.rollout.config import EpisodeConfig
from cua_rl.types import Action, TaskVariant


class GuestDesktop:
    """One leased desktop for one episode."""

    def __init__(
        self,
        pool: DesktopPool,
        handle: DesktopHandle,
        client: GuestClient,
        *,
        cache: FileCache,
        work_root: Path,
        cfg: EpisodeConfig,
        client_password: str = "password",
    ) -> None:
        self.pool = pool
        self.handle = handle
        self.client = client
        self.cache = cache
        self.work_root = work_root
        self.cfg = cfg
        self.client_password = client_password
        self.screen = (1920, 1080)
        self.work_dir: Path | None = None
        self._context: SetupContext | None = None
        self.settled: Settled | None = None

    async def prepare(self, variant: TaskVariant, *, reset: bool = True) -> None:
        """Reset the desktop, run the task's setup, wait for the screen to settle;
        `reset=False` only for a desktop just started, on which nothing ran yet."""
        if reset:
            leased = await self.pool.reset(self.handle)
            self.handle, self.client = leased.handle, leased.client
        self.screen = await self.client.screen_size()
        self.work_root.mkdir(parents=True, exist_ok=True)
        self.work_dir = Path(tempfile.mkdtemp(prefix="episode-", dir=self.work_root))
        self._context = SetupContext(
            screen_width=self.screen[0], screen_height=self.screen[1],
            client_password=self.client_password, output_dir=self.work_dir,
            strict=self.cfg.strict_setup,
        )
        await run_setup_steps(self.client, list(variant.config), task_id=variant.task_id,
                              cache=self.cache, context=self._context)
        if self.cfg.settle_max_s > 0:
            opened = any(step.get("type") in OPENING_STEPS for step in variant.config)
            self.settled = await wait_until_settled(
                lambda: self.client.screenshot("png"), max_s=self.cfg.settle_max_s, drawn=opened)

    async def screenshot(self) -> bytes:
        return await self.client.screenshot(self.cfg.screenshot_format,
                                            self.cfg.screenshot_quality)

    async def act(self, code: str) -> None:
        # A timeout or an exception inside the agent's code is the agent's
        # problem (its step did nothing); only an unreachable guest raises.
        await self.client.act(code)

    async def evaluate(self, variant: TaskVariant, last_action: Action | None) -> float:
        from cua_rl.evaluation import evaluate

        assert self.work_dir is not None and self._context is not None
        try:
            return await evaluate(variant, self.client, cache=self.cache,
                                  context=replace(self._context), last_action=last_action,
                                  cache_dir=self.work_dir)
        finally:
            work_dir, self.work_dir = self.work_dir, None
            await asyncio.get_running_loop().run_in_executor(
                None, shutil.rmtree, work_dir, True)


class PoolDesktops:
    """A `DesktopSource` over a DesktopPool: an episode aborted by the desktop
    sends it back unhealthy, so the pool replaces it."""

    def __init__(self, pool: DesktopPool, *, cache: FileCache, work_root: Path,
                 cfg: EpisodeConfig) -> None:
        self.pool = pool
        self.cache = cache
        self.work_root = work_root
        self.cfg = cfg

    @asynccontextmanager
    async def lease(self) -> AsyncIterator[GuestDesktop]:
        leased = await self.pool.acquire()
        desktop = GuestDesktop(self.pool, leased.handle, leased.client, cache=self.cache,
                               work_root=self.work_root, cfg=self.cfg)
        healthy = True
        try:
            yield desktop
        except EpisodeAborted as exc:
            # a dead guest, or a desktop whose reset failed to start it again
            healthy = not isinstance(exc.__cause__, GuestError | DesktopError)
            raise
        finally:
            self.pool.release(desktop.handle, healthy)
