"""Window operations through the wmctrl / xdotool command-line tools.

OSWorld's guest uses wmctrl for listing, activating and closing windows; doing
the same keeps behaviour (title matching rules, -F strict and -x by-class modes)
identical. Waiting for a window polls with a deadline, never a fixed sleep.
"""

from __future__ import annotations

import asyncio
import shutil
import time

from cua_guest.procs import CommandNotRunnable, run_command

#: How often to look for a window that is expected to appear.
POLL_INTERVAL_S = 0.25


class ToolMissing(Exception):
    """A required command-line tool is not installed (the message names the package)."""


async def list_windows() -> list[tuple[str, str]]:
    """(window id, title) of every managed window."""
    if shutil.which("wmctrl"):
        result = await run_command(["wmctrl", "-l"], timeout=10)
        windows = []
        for line in result.stdout.splitlines():
            parts = line.split(None, 3)  # id, desktop, host, title
            if len(parts) >= 3:
                windows.append((parts[0], parts[3] if len(parts) == 4 else ""))
        return windows
    if shutil.which("xdotool"):
        found = await run_command(["xdotool", "search", "--onlyvisible", "--name", ""], timeout=10)
        windows = []
        for window_id in found.stdout.split():
            name = await run_command(["xdotool", "getwindowname", window_id], timeout=5)
            windows.append((hex(int(window_id)), name.stdout.strip()))
        return windows
    raise ToolMissing("neither wmctrl nor xdotool is installed (apt-get install wmctrl)")


async def wait_for_window(names: list[str], timeout: float) -> str | None:
    """Poll until a window title contains one of `names`; return its id, or None."""
    deadline = time.monotonic() + timeout
    while True:
        for window_id, title in await list_windows():
            if any(name and name in title for name in names):
                return window_id
        if time.monotonic() >= deadline:
            return None
        await asyncio.sleep(POLL_INTERVAL_S)


async def activate_id(window_id: str) -> None:
    """Raise and focus a window by id."""
    if shutil.which("wmctrl"):
        await run_command(["wmctrl", "-i", "-a", window_id], timeout=10)
    else:
        await run_command(["xdotool", "windowactivate", str(int(window_id, 16))], timeout=10)


WINDOW_ALIASES: dict[str, tuple[str, ...]] = {
    "Google Chrome": ("Chromium",),
    "google-chrome.Google-chrome": ("chromium.Chromium",),
    "Mail.thunderbird": ("Mail.thunderbird-default",),
}
"""Names OSWorld's tasks use for Google Chrome, and what Debian's Chromium (which
stands in for it where Chrome is not installed) calls the same window; and the
WM_CLASS of Thunderbird's main window, `Mail.thunderbird` on OSWorld's image but
`Mail.thunderbird-default` since Thunderbird 102 (Debian's). Tried only when the
name itself matches nothing."""


async def wmctrl_by_name(action: str, name: str, strict: bool, by_class: bool) -> int:
    """`wmctrl -[x][F]<action> name` as OSWorld runs it; returns wmctrl's exit code.

    wmctrl exits 1 when no window matched, which the routes report as 404.
    """
    flags = "-" + ("x" if by_class else "") + ("F" if strict else "") + action
    code = -1
    for candidate in (name, *WINDOW_ALIASES.get(name, ())):
        try:
            result = await run_command(["wmctrl", flags, candidate], timeout=10)
        except CommandNotRunnable:
            raise ToolMissing("wmctrl is not installed (apt-get install wmctrl)") from None
        code = result.returncode if result.returncode is not None else -1
        if code == 0:
            break
    return code
