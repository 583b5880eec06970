"""The local desktop's session matches OSWorld's image where a task can tell:
runs as the unprivileged `user`, has a D-Bus session bus where gsettings
persist, AT-SPI for /accessibility, `google-chrome`, and VLC starts (it refuses
to as root). A real desktop per test."""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from tests_support.desktops import local_desktops_unavailable
from tests_support.servers import free_port

from cua_rl.desktop.client import GuestClient
from cua_rl.desktop.providers.local import LocalProvider
from cua_rl.desktop.providers.local_config import LocalProviderConfig
from cua_rl.desktop.settle import wait_until_settled

pytestmark = pytest.mark.desktop

if (_reason := local_desktops_unavailable()) is not None:
    pytest.skip(_reason, allow_module_level=True)


@pytest.fixture
async def guest(tmp_path: Path) -> AsyncIterator[GuestClient]:
    provider = LocalProvider(LocalProviderConfig(state_dir=tmp_path / "state"))
    handle = await provider.start("session")
    try:
        yield provider.client(handle)
    finally:
        await provider.stop(handle)
        await provider.close()


async def _sh(guest: GuestClient, script: str) -> str:
    result = await guest.execute(script, shell=True, timeout=30)
    return (result.output or "").strip()


async def test_session_is_osworlds_unprivileged_user(guest: GuestClient, tmp_path: Path) -> None:
    assert await _sh(guest, "id -un; echo $HOME; stat -c %U /home/user") == (
        "user\n/home/user\nuser")
    # No way to root: no sudo (or one that refuses); the host's /tmp is hidden.
    assert await _sh(guest, "echo password | sudo -S -n id -u 2>/dev/null || echo none") \
        in ("none", "")
    assert await _sh(guest, f"test -e {tmp_path}/state && echo visible || echo hidden") == "hidden"
    assert await _sh(guest, "command -v google-chrome") == "/tmp/.cua-bin/google-chrome"


async def test_gsettings_persist_on_the_session_bus(guest: GuestClient) -> None:
    # Without a session bus gsettings falls back to memory and the default reads back,
    # which is how a lock-screen task used to pass without the agent doing anything.
    key = "org.gnome.desktop.screensaver lock-enabled"
    before = await _sh(guest, f"gsettings get {key}")
    flipped = "false" if before == "true" else "true"
    await _sh(guest, f"gsettings set {key} {flipped}")
    assert await _sh(guest, f"gsettings get {key}") == flipped
    # Each gsettings call is its own process: only the dconf database carries the value.
    assert await _sh(guest, "test -s ~/.config/dconf/user && echo stored") == "stored"


@pytest.mark.skipif(shutil.which("mousepad") is None, reason="mousepad is not installed")
async def test_accessibility_tree_shows_a_running_app(guest: GuestClient) -> None:
    await guest.launch(["mousepad"])
    deadline = time.monotonic() + 60
    tree = ""
    while time.monotonic() < deadline:
        tree = await guest.accessibility_tree() or ""
        if "mousepad" in tree.lower():
            return
        await asyncio.sleep(0.5)
    pytest.fail(f"mousepad never appeared in the AT-SPI tree: {tree[:500]}")


async def test_an_idle_screen_settles(guest: GuestClient) -> None:
    done = await wait_until_settled(lambda: guest.screenshot("png"), max_s=10)
    assert done.settled


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed")
async def test_google_chrome_serves_cdp_as_user(guest: GuestClient) -> None:
    port = free_port()
    await guest.launch(["google-chrome", f"--remote-debugging-port={port}", "about:blank"])
    deadline = time.monotonic() + 60
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            try:
                async with session.get(f"http://127.0.0.1:{port}/json/version",
                                       timeout=aiohttp.ClientTimeout(total=2)) as resp:
                    if resp.status == 200:
                        assert "Chrome" in (await resp.json())["Browser"]
                        break
            except (aiohttp.ClientError, TimeoutError):
                pass
            await asyncio.sleep(0.3)
        else:
            pytest.fail("google-chrome did not serve CDP within 60 s")
    assert await _sh(guest, "pgrep -u user -c chromium || true") not in ("", "0")
    assert await _sh(guest, "test -d ~/.config/google-chrome && echo profile") == "profile"


@pytest.mark.skipif(shutil.which("vlc") is None, reason="vlc is not installed (apt-get vlc)")
async def test_vlc_starts_as_user(guest: GuestClient) -> None:
    await guest.launch(["vlc", "--no-qt-privacy-ask"])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if await _sh(guest, "pgrep -u user -x vlc || true"):
            window = await _sh(guest, "xdotool search --class vlc 2>/dev/null | head -1")
            if window:
                break
        await asyncio.sleep(0.2)
    else:
        pytest.fail("VLC did not open a window within 30 s as `user`")


async def test_guest_package_under_tmp_is_visible_inside(tmp_path: Path) -> None:
    # A checkout under /tmp is hidden by the desktop's private /tmp; the provider
    # binds the guest package back at its own path (`No module named cua_guest` before).
    import cua_guest

    lib = tmp_path / "checkout" / "vm" / "guest"
    shutil.copytree(Path(cua_guest.__file__).parent, lib / "cua_guest")
    provider = LocalProvider(LocalProviderConfig(state_dir=tmp_path / "state",
                                                 guest_package_dir=lib))
    handle = await provider.start("tmp-checkout")
    try:
        guest = provider.client(handle)
        assert await _sh(guest, "echo $PYTHONPATH") == str(lib)
        assert await _sh(guest, f"test -f {lib}/cua_guest/__init__.py && echo seen") == "seen"
    finally:
        await provider.stop(handle)
        await provider.close()
