"""What every provider of ours shares, written once: a cached guest client per desktop,
the ports held while desktops start, the timed reset, the health probe, and waiting
for a guest while watching the desktop that should serve it.

A provider subclasses `ProviderCore` and writes only what differs: how a desktop
starts (`start`), goes back to its initial state (`_reset`), stops (`stop`), whether
what runs it is still there (`_running`), and where its guest listens (the handle
it builds). `ProcessDesktops` (process_core.py) adds the part local and qemu
desktops share: a process per desktop recorded in a state dir.
"""

from __future__ import annotations

import asyncio
import time
from abc import abstractmethod
from collections.abc import Awaitable, Callable, Iterable

from cua_rl.desktop.client import GuestClient
from cua_rl.desktop.providers.base import DesktopHandle, DesktopProvider, GuestClients
from cua_rl.errors import DesktopError, GuestUnavailable

Watch = Callable[[], Awaitable[object]]
"""Raises `DesktopError` once the desktop being waited for is gone (its process
exited, its container stopped, its instance terminated)."""


async def wait_watching(ready: Awaitable[None], watch: Watch, every_s: float) -> None:
    """Await `ready` while calling `watch` every `every_s` seconds, so a desktop that
    dies while starting fails at once instead of at the readiness deadline."""
    task = asyncio.ensure_future(ready)
    try:
        while not task.done():
            await asyncio.wait({task}, timeout=every_s)
            if not task.done():
                await watch()
        task.result()
    finally:
        task.cancel()
        if task.done() and not task.cancelled():
            task.exception()  # the desktop died as its guest did: seen, not leaked


async def poll_until(
    what: str,
    step: Callable[[], Awaitable[bool]],
    *,
    deadline: float,
    interval_s: float,
    limit_s: float,
) -> None:
    """Call `step` every `interval_s` until it returns True; DesktopError naming `what`
    once the monotonic `deadline` has passed (`limit_s` is its length, for the message)."""
    while not await step():
        if time.monotonic() >= deadline:
            raise DesktopError(f"{what} not done within {limit_s:.0f} s")
        await asyncio.sleep(interval_s)


class PortBook:
    """Host ports handed to desktops this process is starting and has not yet bound:
    two concurrent starts never get the same free port."""

    def __init__(self) -> None:
        self.held: set[int] = set()

    def claim(self, candidates: Iterable[int], free: Callable[[int], int | None], what: str) -> int:
        """The first candidate that `free` says can be bound (0: any) and is not held."""
        for candidate in candidates:
            port = free(candidate)
            if port is not None and port not in self.held:
                self.held.add(port)
                return port
        raise DesktopError(f"{what}: no free TCP port")

    def release(self, *ports: int | None) -> None:
        self.held.difference_update(ports)


class ProviderCore(DesktopProvider):
    """The shared half of a provider (see the module docstring)."""

    cannot_fork: str | None = ""
    """Why this provider cannot fork a desktop, in one sentence; None when it can
    (`save_fork`, `restore_fork`); "" keeps `DesktopProvider`'s generic sentence."""

    def __init__(self) -> None:
        self._clients = GuestClients()
        self._ports = PortBook()

    # what each provider writes ----------------------------------------------------

    @abstractmethod
    async def _reset(self, handle: DesktopHandle) -> DesktopHandle:
        """The desktop back in its initial state (its cached client is already dropped)."""

    @abstractmethod
    async def _running(self, handle: DesktopHandle) -> bool:
        """True while what runs the desktop (process, container, instance) is there."""

    # written once -----------------------------------------------------------------

    async def reset(self, handle: DesktopHandle) -> DesktopHandle:
        """`_reset`, timed into the new handle's `info["reset_s"]`."""
        began = time.monotonic()
        await self._clients.drop(handle.id)  # its connections die with the guest
        new = await self._reset(handle)
        new.info["reset_s"] = round(time.monotonic() - began, 3)
        return new

    async def health(self, handle: DesktopHandle) -> bool:
        if not await self._running(handle):
            return False
        return await self.client(handle).healthy(timeout=3.0)

    def fork_support(self) -> str | None:
        return super().fork_support() if self.cannot_fork == "" else self.cannot_fork

    def client(self, handle: DesktopHandle) -> GuestClient:
        """The desktop's cached guest client (rebuilt when its url, token or pin change)."""
        return self._clients.get(handle)

    async def close(self) -> None:
        await self._clients.close()

    async def _guest_ready(
        self,
        handle: DesktopHandle,
        *,
        timeout_s: float,
        interval_s: float,
        watch: Watch,
        every_s: float,
        context: Callable[[], Awaitable[str]] | None = None,
    ) -> None:
        """Poll the handle's guest until it answers, watching the desktop meanwhile;
        DesktopError (with `context()`, e.g. the desktop's log, appended) otherwise."""
        ready = self.client(handle).wait_ready(timeout_s, interval_s=interval_s)
        try:
            await wait_watching(ready, watch, every_s)
        except GuestUnavailable as exc:
            extra = await context() if context is not None else ""
            raise DesktopError(f"{self.type} provider: {exc}{extra}") from exc
