"""The desktops behind every environment of a process, and the event loop they live on.

Gymnasium's API is synchronous; our desktop stack (DesktopPool, GuestClient, task
setup, evaluators) is asyncio. The hub runs one event loop in a daemon thread and
every environment, sync or async, hands its work to it (`call` blocks with a
deadline, `acall` awaits from any other loop). Nothing blocks that loop: decoding
screenshots and scoring run in its executor, as in a training run.

Desktops are shared, not owned: an environment leases one from a one-desktop
`DesktopPool` of its provider settings on its first reset and gives it back on
`close()`; the pool (health checks, replacement of a dead desktop) is kept idle for
the next environment with the same settings, so a test module, a `check_env` run
or a notebook that makes many environments starts a desktop once. Idle desktops
are stopped by `shutdown()` or at interpreter exit; desktops of a process that
died are bound to its pid (`cua-rl vm down --stale`).

At interpreter exit the stop must run before `concurrent.futures` shuts its thread
pools down: stopping a desktop runs blocking steps in the loop's executor, and an
`atexit` hook came too late (`desktop pool: stop failed: RuntimeError('cannot
schedule new futures after shutdown')`, and the desktop stayed as a stale entry of
`vm list`). So the hook is registered where `concurrent.futures` registers its own,
with `threading`'s exit hooks, which run in reverse order of registration, after
the main thread ends and before any interpreter teardown (`_at_exit`).

Invariants: a leased desktop belongs to exactly one environment; a desktop given
back unhealthy is replaced by its pool before anyone leases it again; every call
into the loop has a deadline and a caller that gives up cancels its work.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import logging
import os
import secrets
import shutil
import tempfile
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from cua_rl.desktop.file_cache import FileCache, default_cache_root
from cua_rl.desktop.pool import DesktopPool, LeasedDesktop
from cua_rl.desktop.providers.base import DesktopProvider
from cua_rl.desktop.providers.config import ProviderConfig
from cua_rl.desktop.providers.factory import make_provider

log = logging.getLogger(__name__)
T = TypeVar("T")

CLOSE_TIMEOUT_S = 120.0
"""Deadline for stopping every desktop and provider at shutdown."""


@dataclass(eq=False)
class Lease:
    """One desktop held by one environment, from its one-desktop pool."""

    pool: DesktopPool
    desktop: LeasedDesktop
    key: str
    fresh: bool
    """Just started: nothing ran on it yet, so its first episode needs no reset."""


@dataclass
class _Kind:
    """Desktops of one provider setting: the provider and its idle pools."""

    provider: DesktopProvider
    idle: list[DesktopPool] = field(default_factory=list)
    busy: set[DesktopPool] = field(default_factory=set)


class DesktopHub:
    """One event loop thread, one provider per provider setting, idle desktops kept."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._kinds: dict[str, _Kind] = {}
        self._work_root: Path | None = None
        self._cache: FileCache | None = None

    # the loop ------------------------------------------------------------------------

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The hub's loop, started on first use."""
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def run() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                self._thread = threading.Thread(target=run, name="cua-rl-env-loop", daemon=True)
                self._thread.start()
                if not ready.wait(30.0):
                    raise RuntimeError("cua_rl.env: the event loop thread did not start")
                self._loop = loop
            return self._loop

    def call(self, coro: Coroutine[Any, Any, T], timeout: float, what: str) -> T:
        """Run `coro` on the hub's loop and wait for it; past `timeout` it is cancelled
        and TimeoutError names `what`."""
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError(
                f"{what}: called from the environment's own event loop; "
                "use the asyncio interface (AsyncDesktopEnv) there"
            )
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"{what}: not done within {timeout:g} s") from None
        except BaseException:
            future.cancel()  # KeyboardInterrupt in the caller: stop the work too
            raise

    async def acall(self, coro: Coroutine[Any, Any, T], timeout: float, what: str) -> T:
        """`call` for asyncio callers on another loop: awaits without blocking it."""
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), timeout)
        except TimeoutError:
            raise TimeoutError(f"{what}: not done within {timeout:g} s") from None

    # shared state (used on the loop) ----------------------------------------------

    @property
    def cache(self) -> FileCache:
        """The host's asset cache (`$CUA_RL_CACHE_DIR`), as runs use it."""
        if self._cache is None:
            self._cache = FileCache(default_cache_root())
        return self._cache

    @property
    def work_root(self) -> Path:
        """Per-episode work folders (files evaluators fetch), removed at shutdown."""
        if self._work_root is None:
            self._work_root = Path(tempfile.mkdtemp(prefix="cua-rl-env-"))
        return self._work_root

    async def lease(self, provider: ProviderConfig) -> Lease:
        """A desktop of `provider` settings: an idle one, else a new one-desktop pool."""
        key = provider.model_dump_json()
        kind = self._kinds.get(key)
        if kind is None:
            kind = self._kinds[key] = _Kind(make_provider(provider, owner_pid=os.getpid()))
        fresh = not kind.idle
        if kind.idle:
            pool = kind.idle.pop()
        else:
            pool = DesktopPool(kind.provider, 1, id_prefix=f"gym-{secrets.token_hex(3)}")
            await pool.start()
        kind.busy.add(pool)
        try:
            desktop = await pool.acquire()
        except BaseException:
            kind.busy.discard(pool)
            await pool.close()
            raise
        return Lease(pool, desktop, key, fresh)

    def give_back(self, lease: Lease, healthy: bool) -> None:
        """Return a leased desktop; an unhealthy one is replaced by its pool first."""
        kind = self._kinds[lease.key]
        kind.busy.discard(lease.pool)
        lease.pool.release(lease.desktop.handle, healthy)
        kind.idle.append(lease.pool)

    async def _close(self) -> None:
        kinds, self._kinds = list(self._kinds.values()), {}
        pools = [p for k in kinds for p in (*k.idle, *k.busy)]
        results = await asyncio.gather(*(p.close() for p in pools), return_exceptions=True)
        results += await asyncio.gather(
            *(k.provider.close() for k in kinds), return_exceptions=True
        )
        for result in results:
            if isinstance(result, BaseException):
                log.warning("cua_rl.env: stopping desktops: %r", result)

    def shutdown(self) -> None:
        """Stop every desktop of this process (leased ones too) and the loop; the
        next environment starts them again."""
        with self._lock:
            loop, thread = self._loop, self._thread
        if loop is not None and not loop.is_closed() and thread is not None and thread.is_alive():
            try:
                self.call(self._close(), CLOSE_TIMEOUT_S, "cua_rl.env shutdown")
            finally:
                loop.call_soon_threadsafe(loop.stop)
                thread.join(10.0)
                if not thread.is_alive():
                    loop.close()
        if self._work_root is not None:
            shutil.rmtree(self._work_root, ignore_errors=True)
            self._work_root = None


HUB = DesktopHub()
"""The process's hub: every environment uses it unless given another."""


def shutdown() -> None:
    """Stop the desktops every environment of this process kept (also done at exit)."""
    HUB.shutdown()


def _at_exit(hook: Callable[[], None]) -> None:
    """Run `hook` at interpreter exit before `concurrent.futures` stops accepting work
    (module doc). `threading._register_atexit` is how the standard library orders
    exactly this (concurrent.futures uses it); its hooks run last-registered first,
    so the thread pool's own is imported, and thereby registered, before ours. An
    interpreter without it gets a plain `atexit` hook."""
    import concurrent.futures.thread  # noqa: F401 - registers its exit hook first

    register = getattr(threading, "_register_atexit", None)
    if register is None:
        atexit.register(hook)
    else:
        register(hook)


_at_exit(shutdown)
