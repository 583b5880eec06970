"""The provider contract: how the host gets, resets and gives back desktops.

A provider turns a desktop id into a running desktop whose guest server speaks
the guest protocol (docs/architecture.md, guest protocol) and returns a `DesktopHandle`, the
only thing the pool, the actors and the CLI keep. Implementations (local,
container, docker, qemu, aws) live beside this file; `factory.make_provider` picks one
from the `type` of a `ProviderConfig`, so a new provider is one module, one union
member and one entry there.
"""

from __future__ import annotations

import asyncio
import builtins
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from cua_rl.desktop.client import GuestClient
from cua_rl.errors import DesktopError


@dataclass(frozen=True, slots=True)
class DesktopHandle:
    """A running desktop as seen from the host; cheap to copy and to send."""

    id: str
    """Unique among the provider's live desktops; a pool slot reuses it."""
    url: str
    """Base URL of the guest server, e.g. `http://127.0.0.1:41234` (local) or
    `https://10.0.3.7:5000` (a guest on a network, with a TLS pin below)."""
    token: str | None
    """Bearer token of our guest server; None for guests without auth."""
    provider: str
    """The `type` of the provider that owns it."""
    info: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    """Provider details for humans and debugging (display, pid, home, ...)."""
    tls_fingerprint: str | None = None
    """SHA-256 of the guest's certificate, pinned by every client of this desktop; the
    provider knows it before the guest boots (never trust on first use). None for
    plain-http guests on 127.0.0.1 and OSWorld's own server."""
    tls_ca_file: str | None = None
    """Or a CA file that signed the guest's certificate (exclusive with the pin)."""

    def guest_client(self, *, timeout: float = 30.0) -> GuestClient:
        """A new `GuestClient` for this desktop, with its URL, token and TLS pin: the one
        way to build one from a handle, so no caller can forget the pin."""
        client = GuestClient(
            self.url,
            self.token,
            timeout=timeout,
            tls_fingerprint=self.tls_fingerprint,
            ca_file=self.tls_ca_file,
        )
        client.cdp_port = self.cdp_port
        return client

    @property
    def cdp_port(self) -> int | None:
        """The host port forwarded to the desktop's Chromium remote debugging (9222
        inside a sandboxed desktop), or None when the provider forwards none."""
        port = self.info.get("cdp_port")
        return port if isinstance(port, int) and port > 0 else None


@dataclass(frozen=True, slots=True)
class ForkPoint:
    """A desktop's whole state saved once (`DesktopProvider.save_fork`), from which any
    desktop of the same provider can be started (`restore_fork`)."""

    name: str
    """Unique among the provider's live fork points."""
    provider: str
    info: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    """Where the provider keeps it (paths) and what a restored desktop inherits (its
    guest token)."""


class GuestClients:
    """One cached `GuestClient` per desktop (a connection pool each), rebuilt when
    the desktop's url, token or TLS pin changes and closed when the desktop goes away.

    A replaced client is closed too (in a task, as `get` is not a coroutine): it holds
    a keep-alive connection, and dropping it unclosed leaked one session per rebuild
    (an "Unclosed client session" error at the next garbage collection). The CDP port
    is not part of the connection, so a handle that only adds it updates the client."""

    def __init__(self) -> None:
        self._clients: dict[str, tuple[tuple[str | None, ...], GuestClient]] = {}
        self._closing: set[asyncio.Task[None]] = set()

    def get(self, handle: DesktopHandle) -> GuestClient:
        key = (handle.url.rstrip("/"), handle.token, handle.tls_fingerprint, handle.tls_ca_file)
        cached = self._clients.get(handle.id)
        if cached is None or cached[0] != key:
            if cached is not None:
                self._close_later(cached[1])
            cached = self._clients[handle.id] = (key, handle.guest_client())
        cached[1].cdp_port = handle.cdp_port
        return cached[1]

    def _close_later(self, client: GuestClient) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop: no session was ever opened on it either
            return
        task = loop.create_task(client.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def drop(self, desktop_id: str) -> None:
        """Close and forget a desktop's client (its connections died with its guest)."""
        cached = self._clients.pop(desktop_id, None)
        if cached is not None:
            await cached[1].close()

    async def close(self) -> None:
        for _, client in self._clients.values():
            await client.close()
        self._clients.clear()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)


class DesktopProvider(ABC):
    """Starts, resets and stops desktops of one kind.

    Every method may be awaited concurrently for different desktops; a call
    for one desktop never blocks the event loop for long (slow steps run in a
    thread or a subprocess).
    """

    type: str
    owner_pid: int | None = None
    """A run's process: desktops started while it is set stop themselves when that
    process exits, even by SIGKILL (local: the session launcher; container: the
    forwarder; qemu: `owner_watch`; aws desktops rely on the sweep and their
    time-to-live, see `orphans`). None for desktops that outlive their starter
    (`cua-rl vm up`)."""
    orphans: str | None = None
    """None: desktops started while `owner_pid` is set go when that process dies, even
    by SIGKILL (`check_provider` checks it); else how they go instead, in one sentence."""

    @abstractmethod
    async def start(self, desktop_id: str) -> DesktopHandle:
        """Start a desktop and return once its guest answers; DesktopError otherwise."""

    @abstractmethod
    async def reset(self, handle: DesktopHandle) -> DesktopHandle:
        """Bring the desktop back to its initial state; the returned handle replaces
        the given one (the url or token may change)."""

    @abstractmethod
    async def stop(self, handle: DesktopHandle) -> None:
        """Stop the desktop and free everything it held; idempotent."""

    @abstractmethod
    async def health(self, handle: DesktopHandle) -> bool:
        """True when the desktop is alive and its guest answers."""

    def fork_support(self) -> str | None:
        """None when this provider can save a running desktop's whole state and start
        other desktops from it (`save_fork`, `restore_fork`); else why not, in one
        sentence (docs/desktops.md, forks)."""
        return (
            f"the {self.type} provider cannot save a running desktop's whole state "
            "(its apps' processes)"
        )

    async def save_fork(self, handle: DesktopHandle, name: str) -> ForkPoint:
        """Save the desktop's state as fork point `name`. The desktop stops running:
        restore a fork point on it (or reset it) before using it again."""
        raise DesktopError(self.fork_support() or f"{self.type}: save_fork not implemented")

    async def restore_fork(self, handle: DesktopHandle, point: ForkPoint) -> DesktopHandle:
        """Make the desktop a copy of the fork point's state, running; the returned
        handle replaces the given one (its token may change). A later `reset` brings
        back the desktop's own initial state."""
        raise DesktopError(self.fork_support() or f"{self.type}: restore_fork not implemented")

    async def drop_fork(self, point: ForkPoint) -> None:
        """Delete a fork point (desktops restored from it keep running); idempotent."""
        return None

    async def list(self) -> list[DesktopHandle]:
        """Desktops this provider knows about, including ones started by earlier
        processes (so `cua-rl vm list/down` work across invocations)."""
        return []

    async def get(self, desktop_id: str) -> DesktopHandle:
        """The handle of a known desktop by id; DesktopError when there is none."""
        for handle in await self.list():
            if handle.id == desktop_id:
                return handle
        raise DesktopError(f"{self.type} provider: no desktop {desktop_id!r}")

    async def remains(self, handle: DesktopHandle) -> builtins.list[str]:
        """What of the desktop still exists (processes, containers, VMs, instances), a
        phrase each; [] once it is wholly gone. The default asks `health`."""
        return [f"desktop {handle.id!r} still answers"] if await self.health(handle) else []

    async def close(self) -> None:
        """Release the provider's own resources (HTTP sessions); desktops stay up."""
        return None
