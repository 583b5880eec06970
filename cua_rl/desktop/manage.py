"""Desktops handled by hand, outside any run: start a batch, list, stop, act on
one, take a screenshot (what `cua-rl vm` offers).

Desktops outlive the process that started them: a later call finds them through
the provider (for local desktops, its state dir), which is why listing and
stopping also consult the local state dirs, where a desktop's owner and
staleness are recorded.
"""

from __future__ import annotations

import asyncio
import secrets
import typing
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from cua_rl.desktop.exec_result import ExecResult
from cua_rl.desktop.providers.base import DesktopHandle, DesktopProvider
from cua_rl.desktop.providers.config import ProviderConfig

if TYPE_CHECKING:
    from cua_rl.desktop.providers.local.state import DesktopState

T = TypeVar("T")


def provider_configs() -> dict[str, type[BaseModel]]:
    """type -> config model of every provider (the members of `ProviderConfig`), so a
    new provider is offered here as soon as it joins the union."""
    union = typing.get_args(ProviderConfig)[0]
    return {
        typing.get_args(m.model_fields["type"].annotation)[0]: m for m in typing.get_args(union)
    }


def run_closing(coro_fn: Callable[[DesktopProvider], Awaitable[T]], provider: DesktopProvider) -> T:
    """Run one async operation on `provider` and always close the provider after it."""

    async def main() -> T:
        try:
            return await coro_fn(provider)
        finally:
            await provider.close()

    return asyncio.run(main())


def as_dict(handle: DesktopHandle) -> dict[str, Any]:
    """A desktop's id, address, credentials and provider-specific details."""
    return {
        "id": handle.id,
        "url": handle.url,
        "token": handle.token,
        "tls_fingerprint": handle.tls_fingerprint,
        **handle.info,
    }


async def start_desktops(provider: DesktopProvider, count: int) -> list[DesktopHandle]:
    """Start `count` desktops, all or nothing: a half-started fleet is harder to
    clean up, so when one fails the others are stopped and its error raised."""
    prefix = f"vm-{secrets.token_hex(3)}"
    results = await asyncio.gather(
        *(provider.start(f"{prefix}-{i}") for i in range(count)), return_exceptions=True
    )
    handles = [r for r in results if isinstance(r, DesktopHandle)]
    failed = [r for r in results if isinstance(r, BaseException)]
    if failed:
        await asyncio.gather(*(provider.stop(h) for h in handles))
        raise failed[0]
    return handles


def desktop_states(provider: DesktopProvider) -> list[DesktopState]:
    """Every desktop dir of a local provider, with owner and staleness (other
    providers keep no host state dirs: none)."""
    from cua_rl.desktop.providers.local import state as st
    from cua_rl.desktop.providers.local.provider import LocalProvider, record_alive

    if not isinstance(provider, LocalProvider):
        return []
    return st.desktop_states(provider.state_dir, record_alive)


async def list_desktops(provider: DesktopProvider) -> list[dict[str, Any]]:
    """Every desktop of the provider (also ones started by earlier processes); a
    local one carries `owner_pid` and `stale` (its run or its session is gone)."""
    handles = {h.id: as_dict(h) for h in await provider.list()}
    rows = []
    for state in desktop_states(provider):
        row = handles.pop(state.id, None) or {"id": state.id, "url": None, "alive": False}
        rows.append({**row, "owner_pid": state.owner_pid, "stale": state.stale})
    return rows + list(handles.values())


async def stop_desktops(
    provider: DesktopProvider,
    desktop_ids: typing.Sequence[str],
    *,
    all_: bool = False,
    stale: bool = False,
    force: bool = False,
) -> tuple[list[str], list[str]]:
    """Stop the desktops named (or every one with `all_`, the stale ones with `stale`)
    and delete their state; (stopped ids, reasons for the ones kept). Local desktops
    that a live run owns are kept unless `force`: that run would lose them."""
    states = {s.id: s for s in desktop_states(provider)}
    if all_:
        ids = [h.id for h in await provider.list()]
    elif stale:
        ids = [i for i, s in states.items() if s.stale]
    else:
        ids = list(desktop_ids)
    kept = (
        []
        if force
        else [
            f"kept {i}: owned by the live run pid {states[i].owner_pid} (--force stops it)"
            for i in ids
            if i in states and states[i].owner_alive
        ]
    )
    ids = [i for i in ids if force or i not in states or not states[i].owner_alive]
    if not stale:  # named or listed desktops must exist (a typo is an error)
        handles = [await provider.get(i) for i in ids]
    if hasattr(provider, "stop_id"):  # local: also removes a stale desktop's state
        await asyncio.gather(*(provider.stop_id(i) for i in ids))
    else:
        await asyncio.gather(*(provider.stop(h) for h in handles))
    return ids, kept


async def act_on(
    provider: DesktopProvider, desktop_id: str, code: str, timeout: float
) -> ExecResult:
    """Run pyautogui `code` on a desktop through its guest's /act."""
    handle = await provider.get(desktop_id)
    async with handle.guest_client() as client:
        return await client.act(code, timeout=timeout)


async def screenshot_of(provider: DesktopProvider, desktop_id: str) -> bytes:
    """A PNG screenshot of a desktop."""
    handle = await provider.get(desktop_id)
    async with handle.guest_client() as client:
        return await client.screenshot("png")
