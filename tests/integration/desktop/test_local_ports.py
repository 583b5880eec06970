"""A local desktop whose forwarder port is taken between the pick and the bind starts
on fresh ports, on a first start and on a reset (the reset's preferred port stolen)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from tests_support.desktops import local_desktops_unavailable
from tests_support.ports import PortThief

from cua_rl.desktop.providers.local import provider as local_module
from cua_rl.desktop.providers.local.config import LocalProviderConfig
from cua_rl.desktop.providers.local.provider import LocalProvider

pytestmark = pytest.mark.desktop

if (_reason := local_desktops_unavailable()) is not None:
    pytest.skip(_reason, allow_module_level=True)


@pytest.fixture
def thief(monkeypatch: pytest.MonkeyPatch) -> Iterator[PortThief]:
    thief = PortThief()
    monkeypatch.setattr(local_module, "reserve_port", thief.wrap(local_module.reserve_port))
    yield thief
    thief.close()


@pytest.fixture
async def provider(tmp_path: Path) -> AsyncIterator[LocalProvider]:
    provider = LocalProvider(LocalProviderConfig(state_dir=tmp_path / "state", ready_timeout_s=60))
    yield provider
    for handle in await provider.list():
        await provider.stop(handle)
    await provider.close()


async def test_a_desktop_whose_port_was_taken_starts_on_fresh_ports(
    provider: LocalProvider, thief: PortThief, caplog: pytest.LogCaptureFixture
) -> None:
    stolen = thief.arm(1)  # the guest port of the first start
    with caplog.at_level(logging.WARNING):
        handle = await provider.start("ports")
    port = urlsplit(handle.url).port
    assert port is not None and port != stolen[0]
    assert await provider.health(handle)
    retries = [
        r.getMessage()
        for r in caplog.records
        if r.getMessage().startswith("start of desktop 'ports' failed")
    ]
    assert len(retries) == 1 and f"127.0.0.1:{stolen[0]} is in use" in retries[0]

    thief.arm(1)  # the reset prefers the desktop's port: taken after that pick
    handle = await provider.reset(handle)
    assert stolen[1] == port
    assert urlsplit(handle.url).port not in stolen
    assert await provider.health(handle)
