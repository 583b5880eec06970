"""DesktopPool invariants against an in-memory provider (real desktops: see
tests/integration/desktop/test_local_provider.py)."""

from __future__ import annotations

import asyncio

import pytest

from cua_rl.desktop.pool import DesktopPool
from cua_rl.desktop.providers.base import DesktopHandle, DesktopProvider
from cua_rl.errors import DesktopError, GuestUnavailable


class MemoryProvider(DesktopProvider):
    """Desktops that exist only as handles; `kill(id)` makes one fail health checks."""

    type = "memory"

    def __init__(self, fail_starts: int = 0) -> None:
        self.running: dict[str, DesktopHandle] = {}
        self.dead: set[str] = set()
        self.generation = 0
        self.fail_starts = fail_starts

    async def start(self, desktop_id: str) -> DesktopHandle:
        await asyncio.sleep(0)
        if self.fail_starts:
            self.fail_starts -= 1
            raise DesktopError(f"cannot start {desktop_id}")
        assert desktop_id not in self.running, "a slot was started twice"
        self.generation += 1
        handle = DesktopHandle(
            desktop_id,
            f"http://127.0.0.1:9/{self.generation}",
            "t",
            self.type,
            {"generation": self.generation},
        )
        self.running[desktop_id] = handle
        return handle

    async def reset(self, handle: DesktopHandle) -> DesktopHandle:
        return handle

    async def stop(self, handle: DesktopHandle) -> None:
        self.running.pop(handle.id, None)
        self.dead.discard(handle.id)

    async def health(self, handle: DesktopHandle) -> bool:
        return handle.id in self.running and handle.id not in self.dead


async def until(predicate, deadline_s: float = 5.0) -> None:
    end = asyncio.get_running_loop().time() + deadline_s
    while not predicate():
        assert asyncio.get_running_loop().time() < end, "condition not reached"
        await asyncio.sleep(0.01)


async def test_leases_are_exclusive_and_waiters_get_released_desktops() -> None:
    provider = MemoryProvider()
    async with DesktopPool(provider, 2, id_prefix="p", health_interval_s=60) as pool:
        first, second = await pool.acquire(), await pool.acquire()
        assert first.handle.id != second.handle.id
        waiter = asyncio.create_task(pool.acquire())
        await asyncio.sleep(0.05)
        assert not waiter.done()  # nothing idle: never hand out a leased desktop
        pool.release(first.handle, healthy=True)
        third = await asyncio.wait_for(waiter, 1)
        assert third.handle.id == first.handle.id
        with pytest.raises(DesktopError, match="does not belong"):
            pool.release(DesktopHandle("p-9", "u", None, "memory"), True)
    assert provider.running == {}


async def test_double_release_is_refused() -> None:
    async with DesktopPool(MemoryProvider(), 1, id_prefix="p", health_interval_s=60) as pool:
        leased = await pool.acquire()
        pool.release(leased.handle, healthy=True)
        with pytest.raises(DesktopError, match="not leased"):
            pool.release(leased.handle, healthy=True)


async def test_unhealthy_release_and_guest_unavailable_replace_the_desktop() -> None:
    provider = MemoryProvider()
    async with DesktopPool(provider, 1, id_prefix="p", health_interval_s=60) as pool:
        with pytest.raises(GuestUnavailable):
            async with pool.lease() as (handle, _client):
                raise GuestUnavailable("gone")
        await until(lambda: pool.replacements == 1 and pool.idle_count == 1)
        async with pool.lease() as (new, _client):
            assert new.id == handle.id and new.info["generation"] == 2


async def test_health_loop_replaces_dead_idle_desktop() -> None:
    provider = MemoryProvider()
    async with DesktopPool(
        provider, 2, id_prefix="p", health_interval_s=0.02, failures_to_replace=2
    ) as pool:
        provider.dead.add("p-1")
        await until(lambda: pool.replacements == 1 and pool.idle_count == 2)
        assert provider.running["p-1"].info["generation"] == 3


async def test_dead_leased_desktop_is_replaced_on_release_not_returned() -> None:
    provider = MemoryProvider()
    async with DesktopPool(
        provider, 1, id_prefix="p", health_interval_s=0.02, failures_to_replace=1
    ) as pool:
        leased = await pool.acquire()
        provider.dead.add("p-0")
        await asyncio.sleep(0.1)
        assert pool.replacements == 0  # still leased: the lessee owns it
        pool.release(leased.handle, healthy=True)
        await until(lambda: pool.replacements == 1)
        again = await pool.acquire()
        assert again.handle.info["generation"] == 2


async def test_failed_restart_is_retried() -> None:
    provider = MemoryProvider()
    async with DesktopPool(
        provider, 1, id_prefix="p", health_interval_s=60, retry_backoff_s=0.01
    ) as pool:
        leased = await pool.acquire()
        provider.fail_starts = 2
        pool.release(leased.handle, healthy=False)
        await until(lambda: pool.idle_count == 1)
        assert pool.replacements == 1


async def test_start_failure_stops_the_started_ones_and_close_wakes_waiters() -> None:
    provider = MemoryProvider(fail_starts=1)
    pool = DesktopPool(provider, 3, id_prefix="p")
    with pytest.raises(DesktopError, match="failed to start"):
        await pool.start()
    assert provider.running == {}
    with pytest.raises(DesktopError, match="closed"):
        await pool.acquire()


async def test_restarts_are_bounded_and_a_pool_with_no_desktop_left_fails() -> None:
    provider = MemoryProvider()
    async with DesktopPool(
        provider, 1, id_prefix="p", health_interval_s=60, retry_backoff_s=0.001, restart_attempts=3
    ) as pool:
        leased = await pool.acquire()
        provider.fail_starts = 10  # the provider is broken for good
        waiter = asyncio.create_task(pool.acquire())
        pool.release(leased.handle, healthy=False)
        with pytest.raises(DesktopError, match="failed to restart 3 times"):
            await asyncio.wait_for(waiter, 5)
        assert pool.lost == 1 and provider.fail_starts == 7  # 3 attempts, then given up


async def test_work_ahead_never_takes_a_desktop_an_actor_waits_for() -> None:
    """`try_acquire` (spare desktops) gets an idle desktop only when no `acquire` waits."""
    provider = MemoryProvider()
    async with DesktopPool(provider, 2, id_prefix="p", health_interval_s=60) as pool:
        first = pool.try_acquire()
        second = await pool.acquire()
        assert first is not None and pool.try_acquire() is None  # none idle
        waiting = asyncio.create_task(pool.acquire())
        await asyncio.sleep(0)
        pool.release(first.handle, True)
        assert pool.try_acquire() is None  # the waiter goes first
        assert (await waiting).handle.id == first.handle.id
        pool.release(second.handle, True)
        assert pool.try_acquire() is not None


async def test_adopted_desktops_are_pooled_and_can_be_handed_back_running() -> None:
    provider = MemoryProvider()
    handles = [await provider.start("a"), await provider.start("b")]
    pool = DesktopPool(provider, 2, health_interval_s=60)
    await pool.start(adopt=handles)
    leased = {(await pool.acquire()).handle.id, (await pool.acquire()).handle.id}
    assert leased == {"a", "b"}
    await pool.close(stop=False)
    assert set(provider.running) == {"a", "b"}
    with pytest.raises(ValueError, match="adopt 1 desktops into a pool of 2"):
        await DesktopPool(provider, 2).start(adopt=handles[:1])
