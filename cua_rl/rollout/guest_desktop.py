"""Episodes on real desktops: a leased guest desktop as an `EpisodeDesktop`.

Every episode starts from a reset desktop (the pool's provider restores it),
runs the task's setup steps, and ends with OSWorld's evaluate(). Files the
evaluator fetches live in a per-episode work directory that is removed after
scoring, so long runs do not fill the disk.

Two switches change where the setup happens, never what the episode sees:
- `fleet.spare_desktops`: the desktop may come set up already (`SpareDesktops`);
- `fleet.fork_groups`: a group's first rollout sets the task up once and saves the
  desktop as a fork point; every rollout of the group starts from a restore of it
  (`GroupForks`), where the provider and the task allow.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from cua_rl import spans
from cua_rl.desktop.client import GuestClient
from cua_rl.desktop.file_cache import FileCache
from cua_rl.desktop.pool import DesktopPool, LeasedDesktop
from cua_rl.desktop.providers.base import DesktopHandle
from cua_rl.desktop.settle import OPENING_STEPS, Settled, wait_until_settled
from cua_rl.desktop.setup_steps import SetupContext, run_setup_steps
from cua_rl.errors import EpisodeAborted
from cua_rl.rollout.config import EpisodeConfig
from cua_rl.rollout.group_forks import GroupForks
from cua_rl.rollout.prepared import SavedSetup, desktop_failed
from cua_rl.rollout.scheduler import GroupScheduler, RolloutTicket
from cua_rl.rollout.spare_desktops import SpareDesktops
from cua_rl.types import Action, TaskVariant

PROBE_TIMEOUT_S = 10.0
"""A task's progress probe is a quick read of a file or a window: 10 s is generous."""


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
        ticket: RolloutTicket | None = None,
        forks: GroupForks | None = None,
    ) -> None:
        self.pool = pool
        self.handle = handle
        self.client = client
        self.cache = cache
        self.work_root = work_root
        self.cfg = cfg
        self.client_password = client_password
        self.ticket = ticket
        """The rollout this desktop is leased for (None: a spare not taken yet)."""
        self.forks = forks
        self.screen = (1920, 1080)
        self.work_dir: Path | None = None
        self._context: SetupContext | None = None
        self.settled: Settled | None = None
        self.prepared_for: str | None = None
        """The variant id whose setup this desktop holds, untouched (a spare's)."""
        self.pending: asyncio.Task[None] | None = None
        """A spare's setup still running when its actor claimed it (`SpareDesktops`)."""

    async def prepare(self, variant: TaskVariant, *, reset: bool = True) -> None:
        """Bring the desktop to the state the task's setup leaves: from a fork of its
        group's one setup (`fleet.fork_groups`), as a spare already set up for it, or
        by resetting it and running the setup here. `reset=False` only for a desktop
        just started, on which nothing ran yet."""
        await self.finish_pending()
        if self.forks is not None and self.ticket is not None and self.forks.applies(variant):
            await self.forks.start(self, self.ticket.group_id, variant)
            return
        if self.prepared_for == variant.variant_id:
            return
        await self.setup(variant, reset=reset)

    async def finish_pending(self, cancel: bool = False) -> None:
        """Wait for (or with `cancel`, stop) a claimed spare's setup still running on
        this desktop; a failed one leaves it unprepared (the caller sets it up)."""
        pending, self.pending = self.pending, None
        if pending is None:
            return
        if cancel:
            pending.cancel()
        await asyncio.wait({pending})
        if pending.cancelled() or pending.exception() is not None:
            self.prepared_for = None

    async def setup(self, variant: TaskVariant, *, reset: bool = True) -> None:
        """Reset the desktop, run the task's setup, wait for the screen to settle."""
        self.prepared_for = None
        self.discard_work()
        if reset:
            leased = await self.pool.reset(self.handle)
            self.handle, self.client = leased.handle, leased.client
        self.screen = await self.client.screen_size()
        self.work_dir = self._new_work_dir()
        self._context = SetupContext(
            screen_width=self.screen[0],
            screen_height=self.screen[1],
            client_password=self.client_password,
            output_dir=self.work_dir,
            strict=self.cfg.strict_setup,
        )
        await run_setup_steps(
            self.client,
            list(variant.config),
            task_id=variant.task_id,
            cache=self.cache,
            context=self._context,
        )
        if self.cfg.settle_max_s > 0:
            opened = any(step.get("type") in OPENING_STEPS for step in variant.config)
            self.settled = await wait_until_settled(
                lambda: self.client.screenshot("png"), max_s=self.cfg.settle_max_s, drawn=opened
            )
        self.prepared_for = variant.variant_id

    async def restore(self, saved: SavedSetup) -> None:
        """Become a running copy of a group's saved setup: the desktop's state from the
        fork point, the setup's host-side files (what execute steps wrote for the
        evaluator) copied into a work dir of its own."""
        self.prepared_for = None
        self.discard_work()
        with spans.span("fork_restore", desktop=self.handle.id):
            leased = await self.pool.restore_fork(self.handle, saved.point)
        self.handle, self.client = leased.handle, leased.client
        self.screen = saved.screen
        self.work_dir = self._new_work_dir()
        await asyncio.to_thread(shutil.copytree, saved.files, self.work_dir, dirs_exist_ok=True)
        self._context = replace(saved.context, output_dir=self.work_dir)
        self.settled = saved.settled
        self.prepared_for = saved.variant_id

    def saved_context(self) -> SetupContext | None:
        return self._context

    def discard_work(self) -> None:
        """Remove this desktop's work dir (a spare taken for another task, an abort)."""
        work_dir, self.work_dir = self.work_dir, None
        if work_dir is not None:
            shutil.rmtree(work_dir, ignore_errors=True)

    def _new_work_dir(self) -> Path:
        self.work_root.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix="episode-", dir=self.work_root))

    async def screenshot(self) -> bytes:
        encoder = None if self.cfg.screenshot_encoder == "auto" else self.cfg.screenshot_encoder
        return await self.client.screenshot(
            self.cfg.screenshot_format, self.cfg.screenshot_quality, encoder=encoder
        )

    async def act(self, code: str) -> None:
        # A timeout or an exception inside the agent's code is the agent's
        # problem (its step did nothing); only an unreachable guest raises.
        await self.client.act(code)

    async def read_progress(self, probe: dict[str, Any]) -> int | None:
        """The task's progress count (rollout/step_progress.py); None when its command
        fails or prints no number (a dead guest raises GuestError as usual)."""
        from cua_rl.rollout.step_progress import parse_count

        result = await self.client.execute(
            probe["command"], shell=bool(probe.get("shell")), timeout=PROBE_TIMEOUT_S
        )
        return parse_count(result.output) if result.ok else None

    async def evaluate(self, variant: TaskVariant, last_action: Action | None) -> float:
        from cua_rl.evaluation import evaluate

        assert self.work_dir is not None and self._context is not None
        self.prepared_for = None  # whatever happens next, the setup's state is gone
        try:
            return await evaluate(
                variant,
                self.client,
                cache=self.cache,
                context=replace(self._context),
                last_action=last_action,
                cache_dir=self.work_dir,
            )
        finally:
            work_dir, self.work_dir = self.work_dir, None
            await asyncio.get_running_loop().run_in_executor(None, shutil.rmtree, work_dir, True)


class PoolDesktops:
    """A `DesktopSource` over a DesktopPool: an episode aborted by the desktop
    sends it back unhealthy, so the pool replaces it. With `spares`, that many
    desktops (beyond the actors') are set up ahead for the upcoming rollouts; with
    `forks`, a group's rollouts start from forks of its one setup."""

    def __init__(
        self,
        pool: DesktopPool,
        *,
        cache: FileCache,
        work_root: Path,
        cfg: EpisodeConfig,
        spares: int = 0,
        forks: bool = False,
        make: DesktopFactory | None = None,
    ) -> None:
        self.pool = pool
        self.cache = cache
        self.work_root = work_root
        self.cfg = cfg
        self.forks = GroupForks(pool, work_root / "forks") if forks else None
        self._make = make or self._guest_desktop
        """How a leased desktop becomes an episode's (a `GuestDesktop`; the spares'
        tests pass stand-ins that only count setups)."""
        self.spares: SpareDesktops | None = (
            SpareDesktops(pool, self._make, spares, self.forks) if spares else None
        )

    def _guest_desktop(self, leased: LeasedDesktop) -> GuestDesktop:
        return GuestDesktop(
            self.pool,
            leased.handle,
            leased.client,
            cache=self.cache,
            work_root=self.work_root,
            cfg=self.cfg,
            forks=self.forks,
        )

    @asynccontextmanager
    async def lease(self, ticket: RolloutTicket | None = None) -> AsyncIterator[GuestDesktop]:
        desktop = None
        if self.spares is not None and ticket is not None:
            desktop = await self.spares.take(ticket)
        if desktop is None:
            stolen = (
                self.spares.steal()
                if self.spares is not None and not self.pool.idle_count
                else None
            )
            desktop = stolen or self._make(await self.pool.acquire())
        desktop.ticket, desktop.forks = ticket, self.forks
        healthy = True
        try:
            yield desktop
        except EpisodeAborted as exc:
            # a dead guest, or a desktop whose reset failed to start it again
            healthy = not desktop_failed(exc)
            raise
        finally:
            await desktop.finish_pending(cancel=True)  # a claimed spare never prepared
            desktop.discard_work()
            self.pool.release(desktop.handle, healthy)
            if self.spares is not None:
                self.spares.kick()

    @asynccontextmanager
    async def ahead(self, scheduler: GroupScheduler) -> AsyncIterator[None]:
        """While the fleet runs: spare desktops follow `scheduler`'s look-ahead; at the
        end, spares go back to the pool and fork points are deleted."""
        try:
            if self.spares is not None:
                self.spares.watch(scheduler.upcoming, scheduler.group_size)
            yield
        finally:
            if self.spares is not None:
                await self.spares.close()
            if self.forks is not None:
                await self.forks.close()

    def group_done(self, group_id: str) -> None:
        """A group was emitted: its fork point is no longer needed."""
        if self.forks is not None:
            self.forks.done(group_id)

    def figures(self) -> dict[str, int]:
        """Counts for reports: spare hits and misses, fork points saved and restored."""
        out: dict[str, int] = {}
        if self.spares is not None:
            out.update(self.spares.counts)
        if self.forks is not None:
            out.update(self.forks.counts)
        return out


DesktopFactory = Callable[[LeasedDesktop], GuestDesktop]
"""Wraps a leased desktop for an episode (the spares' preparer uses the same one)."""
