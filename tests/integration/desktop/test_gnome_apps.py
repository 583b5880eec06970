"""GNOME Terminal, Nautilus and gedit in a local sandboxed desktop, as OSWorld's
os and multi_apps tasks use them: each shows its window (gnome-terminal-server
activated on the desktop's session bus), Ctrl+Alt+T opens a terminal (openbox's
key, `local.sandbox.OPENBOX_KEYS`), and /terminal returns what a command typed
into it printed (AT-SPI of gnome-terminal-server). One desktop for the module."""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from tests_support.desktops import local_desktops_unavailable

from cua_rl.desktop.client import GuestClient
from cua_rl.desktop.providers.local.config import LocalProviderConfig
from cua_rl.desktop.providers.local.provider import LocalProvider

pytestmark = [pytest.mark.desktop, pytest.mark.asyncio(loop_scope="module")]

if (_reason := local_desktops_unavailable()) is not None:
    pytest.skip(_reason, allow_module_level=True)

DEADLINE_S = 30.0


def _needs(app: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(
        shutil.which(app) is None, reason=f"{app} is not installed (apt-get install {app})"
    )


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def guest(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[GuestClient]:
    provider = LocalProvider(
        LocalProviderConfig(state_dir=tmp_path_factory.mktemp("gnome-apps") / "state")
    )
    handle = await provider.start("gnome-apps")
    try:
        yield provider.client(handle)
    finally:
        await provider.stop(handle)
        await provider.close()


async def _windows(guest: GuestClient) -> list[str]:
    result = await guest.execute(["wmctrl", "-l"], timeout=10)
    return [
        line.split(None, 3)[3]
        for line in (result.output or "").splitlines()
        if len(line.split(None, 3)) == 4
    ]


async def _wait_window(guest: GuestClient, matches, what: str) -> str:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        found = [name for name in await _windows(guest) if matches(name)]
        if found:
            return found[0]
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} window within {DEADLINE_S:.0f} s: {await _windows(guest)}")
        await asyncio.sleep(0.2)


async def _close_all(guest: GuestClient, title: str) -> None:
    """Close every window titled `title` and wait until none is listed."""
    deadline = time.monotonic() + DEADLINE_S
    while title in await _windows(guest):
        if time.monotonic() > deadline:
            pytest.fail(f"{title!r} windows still open after {DEADLINE_S:.0f} s")
        await guest.execute(["wmctrl", "-c", title], timeout=10)
        await asyncio.sleep(0.2)


@_needs("gnome-terminal")
async def test_ctrl_alt_t_opens_a_terminal_whose_text_terminal_returns(guest: GuestClient) -> None:
    await _close_all(guest, "Terminal")
    # What tasks do: press GNOME's shortcut, then type a command.
    await guest.act("pyautogui.hotkey('ctrl', 'alt', 't')")
    await _wait_window(guest, lambda name: name == "Terminal", "Terminal")
    await guest.activate_window("Terminal")
    await guest.act("pyautogui.write('echo cua-$((6*7))-done\\n', interval=0.01)")
    deadline = time.monotonic() + DEADLINE_S
    text = None
    while text is None or "cua-42-done" not in text:
        if time.monotonic() > deadline:
            pytest.fail(f"/terminal never showed the command's output: {text!r}")
        await asyncio.sleep(0.2)
        text = await guest.terminal_output()
    # The command as typed and its output on a line of its own.
    assert "echo cua-$((6*7))-done" in text
    assert "cua-42-done" in text.splitlines()
    # The server was activated over the session bus, not started by us.
    servers = await guest.execute(
        "pgrep -u user -f /usr/libexec/gnome-terminal-server", shell=True, timeout=10
    )
    assert (servers.output or "").strip()
    await _close_all(guest, "Terminal")


@_needs("gnome-terminal")
async def test_gnome_terminal_command_line_runs_its_command(guest: GuestClient) -> None:
    # Tasks start gnome-terminal on the bus where OSWorld's image has it (uid 1000's
    # runtime directory, a link to the desktop's bus here) and leave it to the agent;
    # the client returns at once and the server opens the window.
    marker = "/tmp/gnome-terminal-ran"
    done = await guest.execute(
        "export DBUS_SESSION_BUS_ADDRESS='unix:path=/run/user/1000/bus'\n"
        "gnome-terminal --maximize --working-directory=/tmp -- "
        f"bash -c 'touch {marker}; exec bash'",
        shell=True,
        timeout=30,
    )
    assert done.returncode == 0, done
    await _wait_window(guest, lambda name: name == "Terminal", "Terminal")
    deadline = time.monotonic() + DEADLINE_S
    while (await guest.execute(["test", "-e", marker], timeout=10)).returncode != 0:
        if time.monotonic() > deadline:
            pytest.fail("the terminal's command never ran")
        await asyncio.sleep(0.2)
    await _close_all(guest, "Terminal")


@_needs("nautilus")
async def test_nautilus_shows_a_folder(guest: GuestClient) -> None:
    await guest.execute("mkdir -p ~/Desktop/nautilus-here", shell=True, timeout=10)
    await guest.launch(["nautilus", "--new-window", "/home/user/Desktop/nautilus-here"])
    title = await _wait_window(guest, lambda name: name == "nautilus-here", "Nautilus")
    await _close_all(guest, title)


@_needs("gedit")
async def test_gedit_opens_a_file(guest: GuestClient) -> None:
    await guest.execute("echo hello > ~/gedit-note.txt", shell=True, timeout=10)
    await guest.launch(["gedit", "/home/user/gedit-note.txt"])
    # OSWorld's tasks wait for gedit's "<file> (<dir>) - gedit" title.
    title = await _wait_window(
        guest, lambda name: name.endswith(" - gedit") and name.startswith("gedit-note.txt"), "gedit"
    )
    await _close_all(guest, title)
