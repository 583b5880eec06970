"""Desktops by hand (`cua_rl.desktop.manage`, what `cua-rl vm` calls) without
desktops: a fake provider stands in, so the all-or-nothing start and the choice of
what `vm down` stops are checked without click and without a display."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from cua_rl.cli.vm import build_provider
from cua_rl.desktop.manage import (
    list_desktops,
    provider_configs,
    run_closing,
    start_desktops,
    stop_desktops,
)
from cua_rl.desktop.providers.base import DesktopHandle
from cua_rl.errors import ConfigError, DesktopError


class FakeProvider:
    """Starts desktops in memory; desktop ids in `fail` raise on start."""

    type = "fake"

    def __init__(self, fail: tuple[str, ...] = ()) -> None:
        self.fail = fail
        self.live: dict[str, DesktopHandle] = {}
        self.closed = False

    async def start(self, desktop_id: str) -> DesktopHandle:
        if desktop_id.endswith(self.fail):
            raise DesktopError(f"{desktop_id} did not boot")
        handle = DesktopHandle(desktop_id, f"http://127.0.0.1/{desktop_id}", "t", "fake")
        self.live[desktop_id] = handle
        return handle

    async def stop(self, handle: DesktopHandle) -> None:
        self.live.pop(handle.id, None)

    async def get(self, desktop_id: str) -> DesktopHandle:
        if desktop_id not in self.live:
            raise DesktopError(f"no desktop {desktop_id!r}")
        return self.live[desktop_id]

    async def list(self) -> list[DesktopHandle]:
        return list(self.live.values())

    async def close(self) -> None:
        self.closed = True


def test_every_provider_of_the_config_union_is_offered() -> None:
    assert {"local", "container", "docker", "qemu", "aws"} <= set(provider_configs())


def test_a_bad_setting_is_a_config_error_naming_the_provider(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--provider qemu --set: ram_size: unknown key"):
        build_provider("qemu", tmp_path, settings=("ram_size=8G",))


def test_start_is_all_or_nothing() -> None:
    provider = FakeProvider()
    handles = asyncio.run(start_desktops(provider, 3))  # type: ignore[arg-type]
    assert len(handles) == len(provider.live) == 3
    failing = FakeProvider(fail=("-1",))
    with pytest.raises(DesktopError, match="did not boot"):
        asyncio.run(start_desktops(failing, 3))  # type: ignore[arg-type]
    assert failing.live == {}  # the two that started were stopped again


def test_stop_names_all_and_unknown_ids() -> None:
    provider: Any = FakeProvider()

    async def go() -> tuple[list[str], list[str], list[dict[str, Any]]]:
        await start_desktops(provider, 3)
        first = sorted(provider.live)[0]
        stopped, kept = await stop_desktops(provider, [first])
        assert (stopped, kept) == ([first], [])
        with pytest.raises(DesktopError, match="no desktop 'typo'"):
            await stop_desktops(provider, ["typo"])
        rows = await list_desktops(provider)
        stopped, kept = await stop_desktops(provider, [], all_=True)
        return stopped, kept, rows

    stopped, kept, rows = asyncio.run(go())
    assert len(rows) == 2 and {"id", "url", "token", "tls_fingerprint"} <= set(rows[0])
    assert sorted(stopped) == sorted(r["id"] for r in rows) and kept == []
    assert provider.live == {}


def test_run_closing_closes_the_provider_also_on_error() -> None:
    provider: Any = FakeProvider()

    async def boom(_provider: Any) -> None:
        raise DesktopError("gone")

    with pytest.raises(DesktopError):
        run_closing(boom, provider)
    assert provider.closed
