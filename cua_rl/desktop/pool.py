"""A fixed-size pool of desktops that actors lease one at a time.

Invariants:
- a leased desktop is never handed out twice: a slot is in the idle queue, or
  leased, or being replaced, never two of these at once;
- a dead desktop is replaced, never returned: a slot that fails its health
  check (or is released with `healthy=False`) is stopped and restarted under
  the same id before it goes back to the idle queue. Only idle desktops are
  health-checked; a lessee that loses its desktop releases it unhealthy.
- restarts are bounded (`restart_attempts`, exponential backoff): a slot whose
  desktop cannot be restarted is lost (logged, counted in `lost`) and the pool
  goes on with the others; when every slot is lost, `acquire` raises
  DesktopError instead of waiting forever.
All state changes happen on the event loop between awaits, so no lock is needed.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from typing import NamedTuple

from cua_rl.desktop.client import GuestClient
from cua_rl.desktop.providers.base import DesktopHandle, DesktopProvider, ForkPoint
from cua_rl.errors import DesktopError, GuestUnavailable
from cua_rl.retry import retrying

log = logging.getLogger(__name__)


class LeasedDesktop(NamedTuple):
    """What `lease()` yields: unpack as `(handle, client)`."""

    handle: DesktopHandle
    client: GuestClient


@dataclass(slots=True, eq=False)
class _Slot:
    desktop_id: str
    handle: DesktopHandle | None = None
    client: GuestClient | None = None
    leased: bool = False
    replacing: bool = False
    failures: int = 0
    lost: bool = False


class DesktopPool:
    """`size` desktops of one provider, leased exclusively and kept alive."""

    def __init__(
        self,
        provider: DesktopProvider,
        size: int,
        *,
        id_prefix: str | None = None,
        health_interval_s: float = 5.0,
        failures_to_replace: int = 2,
        retry_backoff_s: float = 2.0,
        restart_attempts: int = 8,
    ) -> None:
        if size < 1:
            raise ValueError(f"DesktopPool size: expected >= 1, got {size}")
        self.provider = provider
        self.size = size
        self.health_interval_s = health_interval_s
        # One missed /healthz can be a busy desktop (an app starting); a dead
        # launcher fails every check, so two in a row tell them apart.
        self.failures_to_replace = failures_to_replace
        self.retry_backoff_s = retry_backoff_s
        # 8 attempts with backoff from 2 s (capped at 60 s) span a few minutes: a
        # provider that cannot start a desktop for that long is broken, not busy.
        self.restart_attempts = restart_attempts
        prefix = id_prefix or f"pool-{secrets.token_hex(3)}"
        self._slots = [_Slot(f"{prefix}-{i}") for i in range(size)]
        self._idle: deque[_Slot] = deque()
        self._available = asyncio.Event()
        self._tasks: set[asyncio.Task] = set()
        self._health_task: asyncio.Task | None = None
        self._closed = False
        self.replacements = 0
        """Desktops replaced since start (dead or released unhealthy)."""
        self.lost = 0
        """Slots given up after `restart_attempts` failed restarts."""
        self._waiters = 0
        """Callers blocked in `acquire`: `try_acquire` leaves idle desktops to them."""

    async def __aenter__(self) -> DesktopPool:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def idle_count(self) -> int:
        return len(self._idle)

    @property
    def closed(self) -> bool:
        return self._closed

    async def start(self, adopt: list[DesktopHandle] | None = None) -> None:
        """Start every desktop in parallel; if one fails, stop all and raise. `adopt`:
        running desktops of the provider to pool instead of starting `size` new ones
        (as many as `size`; the pool stops them on close like its own)."""
        if adopt is not None:
            if len(adopt) != self.size:
                raise ValueError(
                    f"DesktopPool.start: adopt {len(adopt)} desktops into a pool of {self.size}"
                )
            for slot, handle in zip(self._slots, adopt, strict=True):
                slot.desktop_id = handle.id
                slot.handle = handle
                await self._set_client(slot)
                self._idle.append(slot)
            self._available.set()
            self._health_task = asyncio.create_task(self._health_loop(), name="pool-health")
            return
        try:
            async with asyncio.TaskGroup() as group:
                for slot in self._slots:
                    group.create_task(self._start_slot(slot))
        except* Exception as failed:
            await self.close()
            first = failed.exceptions[0]
            raise DesktopError(
                f"desktop pool: {len(failed.exceptions)} of {self.size} "
                f"desktops failed to start; first: {first}"
            ) from first
        self._health_task = asyncio.create_task(self._health_loop(), name="pool-health")

    @asynccontextmanager
    async def lease(self) -> AsyncIterator[LeasedDesktop]:
        """Wait for an idle desktop and hold it for the block. A GuestUnavailable
        or DesktopError (e.g. a failed reset) escaping the block marks the desktop
        dead, so it is replaced; other errors are the task's, not the desktop's."""
        leased = await self.acquire()
        handle = leased.handle
        healthy = True
        try:
            yield leased
        except (GuestUnavailable, DesktopError):
            healthy = False
            raise
        finally:
            self.release(handle, healthy)

    async def acquire(self) -> LeasedDesktop:
        """Take an idle desktop (waits while none is idle); pair with `release`."""
        while True:
            if self._closed:
                raise DesktopError("desktop pool is closed")
            if self.lost == self.size:
                raise DesktopError(
                    f"desktop pool: all {self.size} desktops failed to "
                    f"restart {self.restart_attempts} times; see the log"
                )
            if self._idle:
                return self._take(self._idle.popleft())
            self._available.clear()
            self._waiters += 1
            try:
                await self._available.wait()
            finally:
                self._waiters -= 1

    def try_acquire(self) -> LeasedDesktop | None:
        """An idle desktop now, or None: none is idle, or a caller of `acquire` is
        waiting for one (it goes first). For work done ahead (spare desktops), which
        must never keep an actor waiting."""
        if self._closed or self._waiters or not self._idle:
            return None
        return self._take(self._idle.popleft())

    def _take(self, slot: _Slot) -> LeasedDesktop:
        slot.leased = True
        assert slot.handle is not None and slot.client is not None
        return LeasedDesktop(slot.handle, slot.client)

    def release(self, handle: DesktopHandle, healthy: bool) -> None:
        """Give a leased desktop back; `healthy=False` has it replaced first."""
        slot = self._slot_of(handle)
        if not slot.leased:
            raise DesktopError(f"desktop {handle.id!r} released but not leased")
        slot.leased = False
        if self._closed:
            return
        if healthy:
            self._idle.append(slot)
            self._available.set()
        else:
            self._replace(slot)

    async def reset(self, handle: DesktopHandle) -> LeasedDesktop:
        """Reset a leased desktop to its initial state; use the returned pair."""
        slot = self._slot_of(handle)
        if not slot.leased or slot.handle is None:
            raise DesktopError(f"desktop {handle.id!r} reset but not leased")
        slot.handle = await self.provider.reset(slot.handle)
        await self._set_client(slot)
        return LeasedDesktop(slot.handle, slot.client)  # type: ignore[arg-type]  # the slot's client is set by _set_client just above

    async def save_fork(self, handle: DesktopHandle, name: str) -> ForkPoint:
        """Save a leased desktop's whole state as a fork point (the provider's
        `save_fork`); the desktop stops running until `restore_fork` or `reset`."""
        slot = self._leased_slot(handle, "forked")
        assert slot.handle is not None
        return await self.provider.save_fork(slot.handle, name)

    async def restore_fork(self, handle: DesktopHandle, point: ForkPoint) -> LeasedDesktop:
        """Make a leased desktop a running copy of `point`; use the returned pair."""
        slot = self._leased_slot(handle, "restored")
        assert slot.handle is not None
        slot.handle = await self.provider.restore_fork(slot.handle, point)
        await self._set_client(slot)
        return LeasedDesktop(slot.handle, slot.client)  # type: ignore[arg-type]  # the slot's client is set by _set_client just above

    def _leased_slot(self, handle: DesktopHandle, what: str) -> _Slot:
        slot = self._slot_of(handle)
        if not slot.leased or slot.handle is None:
            raise DesktopError(f"desktop {handle.id!r} {what} but not leased")
        return slot

    async def close(self, *, stop: bool = True) -> None:
        """Stop every desktop and the background tasks; waiters get DesktopError.
        `stop=False` leaves the desktops running (adopted ones, handed back)."""
        self._closed = True
        self._available.set()
        tasks = [t for t in (self._health_task, *self._tasks) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        results = await asyncio.gather(
            *(self.provider.stop(s.handle) for s in self._slots if s.handle is not None and stop),
            return_exceptions=True,
        )
        for result in results:
            if isinstance(result, BaseException):
                log.warning("desktop pool: stop failed: %r", result)
        for slot in self._slots:
            if slot.client is not None:
                await slot.client.close()
            slot.handle = slot.client = None
        self._idle.clear()

    # internals --------------------------------------------------------------------

    def _slot_of(self, handle: DesktopHandle) -> _Slot:
        for slot in self._slots:
            if slot.desktop_id == handle.id:
                return slot
        raise DesktopError(f"desktop {handle.id!r} does not belong to this pool")

    async def _set_client(self, slot: _Slot) -> None:
        if slot.client is not None:
            await slot.client.close()
        assert slot.handle is not None
        slot.client = slot.handle.guest_client()

    async def _start_slot(self, slot: _Slot) -> None:
        slot.handle = await self.provider.start(slot.desktop_id)
        await self._set_client(slot)
        slot.failures = 0
        self._idle.append(slot)
        self._available.set()

    def _replace(self, slot: _Slot) -> None:
        if slot.replacing:
            return
        slot.replacing = True
        task = asyncio.create_task(self._replace_slot(slot), name=f"replace-{slot.desktop_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _replace_slot(self, slot: _Slot) -> None:
        """Stop the dead desktop and start a new one under the same id; retries
        a failed start (DesktopError) with a backoff, `restart_attempts` times."""
        log.warning("desktop pool: replacing %s", slot.desktop_id)
        if slot.handle is not None:
            try:
                await self.provider.stop(slot.handle)
            except Exception as exc:  # a dead desktop may fail to stop cleanly
                log.warning("desktop pool: stopping %s failed: %r", slot.desktop_id, exc)
        try:
            async for attempt in retrying(
                f"desktop pool: restart of {slot.desktop_id}",
                attempts=self.restart_attempts,
                retry_on=lambda exc: isinstance(exc, DesktopError) and not self._closed,
                backoff_s=self.retry_backoff_s,
                max_backoff_s=60.0,
            ):
                with attempt:
                    await self._start_slot(slot)
        except DesktopError as exc:
            if not self._closed:
                slot.lost = True
                self.lost += 1
                log.error(
                    "desktop pool: giving up %s after %d failed restarts: %s",
                    slot.desktop_id,
                    self.restart_attempts,
                    exc,
                )
                self._available.set()  # waiters re-check whether any slot is left
            return
        finally:
            slot.replacing = False
        self.replacements += 1

    async def _health_loop(self) -> None:
        while not self._closed:
            await asyncio.sleep(self.health_interval_s)
            await asyncio.gather(*(self._check(s) for s in self._slots))

    async def _check(self, slot: _Slot) -> None:
        # Only idle desktops are probed: a leased one is being reset or driven by
        # its lessee (slow answers under load are normal there), and a lessee
        # that loses its desktop sees GuestUnavailable and releases it unhealthy.
        if slot.replacing or slot.handle is None or slot.leased:
            return
        handle = slot.handle
        with suppress(GuestUnavailable):
            if await self.provider.health(handle):
                slot.failures = 0
                return
        # The slot may have changed hands while we awaited; judge its state now.
        if slot.replacing or slot.leased or slot.handle is not handle:
            return
        slot.failures += 1
        if slot.failures < self.failures_to_replace:
            return
        if slot in self._idle:
            self._idle.remove(slot)
            self._replace(slot)
