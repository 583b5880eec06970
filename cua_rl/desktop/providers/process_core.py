"""The part the local and qemu providers share: one process per desktop (a session
launcher, a QEMU), recorded under the state dir once its guest answers, so a desktop
outlives the process that started it and any later process lists, resets or stops it.

Each provider keeps what differs: its record type, how it launches (`start`,
`_reset`), how it kills a desktop (`_kill`) and the handle it builds (`_handle`).
"""

from __future__ import annotations

import asyncio
import builtins
import shutil
import subprocess
from abc import abstractmethod
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Generic, TypeVar

from cua_rl.desktop.providers import owner_watch
from cua_rl.desktop.providers.base import DesktopHandle
from cua_rl.desktop.providers.core import ProviderCore
from cua_rl.desktop.providers.local.state import check_desktop_id
from cua_rl.desktop.providers.records import JsonRecord, load_all
from cua_rl.errors import DesktopError

STOP_DEADLINE_S = 10.0
R = TypeVar("R", bound=JsonRecord)


class ProcessDesktops(ProviderCore, Generic[R]):
    """Desktops as recorded processes; see the module docstring."""

    record_type: type[R]

    def __init__(self, state_dir: Path) -> None:
        super().__init__()
        self.state_dir = Path(state_dir).expanduser()
        self._procs: dict[str, subprocess.Popen] = {}

    # what each provider writes ----------------------------------------------------

    @abstractmethod
    def _kill(self, record: R) -> None:
        """Kill the desktop's processes and wait until they are gone (in a thread)."""

    @abstractmethod
    def _handle(self, record: R) -> DesktopHandle:
        """The handle of a recorded desktop."""

    # written once -----------------------------------------------------------------

    async def stop(self, handle: DesktopHandle) -> None:
        await self.stop_id(handle.id)

    async def stop_id(self, desktop_id: str) -> None:
        """Stop by id (also desktops of earlier processes) and delete their files."""
        await self._clients.drop(desktop_id)
        ddir = self.state_dir / check_desktop_id(desktop_id)
        record = self.record_type.load(ddir)
        if record is not None:
            await asyncio.to_thread(self._kill, record)
        self._reap(desktop_id)
        await asyncio.to_thread(shutil.rmtree, ddir, True)

    async def list(self) -> list[DesktopHandle]:
        return [self._handle(r) for r in load_all(self.state_dir, self.record_type)]

    async def get(self, desktop_id: str) -> DesktopHandle:
        """The handle of a recorded desktop; DesktopError naming the state dir if none."""
        return self._handle(self._record(desktop_id))

    async def _running(self, handle: DesktopHandle) -> bool:
        record = self.record_type.load(self.state_dir / handle.id)
        return record is not None and record.alive

    async def remains(self, handle: DesktopHandle) -> builtins.list[str]:
        record = self.record_type.load(self.state_dir / check_desktop_id(handle.id))
        return [f"{self.type} process {record.pid}"] if record is not None and record.alive else []

    def _record(self, desktop_id: str) -> R:
        record = self.record_type.load(self.state_dir / check_desktop_id(desktop_id))
        if record is None:
            raise DesktopError(f"no {self.type} desktop {desktop_id!r} in {self.state_dir}")
        return record

    async def _start_fresh(
        self, desktop_id: str, launch: Callable[[Path], Awaitable[DesktopHandle]]
    ) -> DesktopHandle:
        """Refuse a desktop that runs, clear a dead one's dir, and `launch` into a new
        dir; a launch that fails leaves no dir (nothing of a desktop that never ran)."""
        ddir = self.state_dir / check_desktop_id(desktop_id)
        old = self.record_type.load(ddir)
        if old is not None and old.alive:
            raise DesktopError(f"desktop {desktop_id!r} is already running (pid {old.pid}, {ddir})")
        await asyncio.to_thread(_fresh_dir, ddir)
        try:
            return await launch(ddir)
        except BaseException:
            await asyncio.shield(asyncio.to_thread(shutil.rmtree, ddir, True))
            raise

    async def _process_ready(
        self,
        proc: subprocess.Popen,
        handle: DesktopHandle,
        what: str,
        *,
        timeout_s: float,
        interval_s: float,
    ) -> None:
        """Poll the guest while watching `proc`, so a desktop whose process exits while
        starting fails at once (`what exited with N`) instead of at the deadline."""

        async def watch() -> None:
            if proc.poll() is not None:
                raise DesktopError(f"{what} exited with {proc.returncode}")

        await self._guest_ready(
            handle, timeout_s=timeout_s, interval_s=interval_s, watch=watch, every_s=0.1
        )

    def _track(self, desktop_id: str, proc: subprocess.Popen, *, watch_owner: bool) -> None:
        """Keep our child of the desktop; with `watch_owner` (a desktop with no
        supervisor of its own) a watcher kills its process group when `owner_pid` dies."""
        self._procs[desktop_id] = proc
        if watch_owner and self.owner_pid is not None:
            owner_watch.spawn(self.owner_pid, proc.pid)

    def _reap(self, desktop_id: str) -> None:
        """Wait for our child of the desktop, if any, so it lingers as no zombie."""
        proc = self._procs.pop(desktop_id, None)
        if proc is not None:
            try:
                proc.wait(timeout=STOP_DEADLINE_S)
            except subprocess.TimeoutExpired:
                proc.kill()


def _fresh_dir(ddir: Path) -> None:
    if ddir.exists():  # a stale record of a desktop that died: start clean
        shutil.rmtree(ddir)
    ddir.mkdir(parents=True)
