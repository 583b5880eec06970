"""Getters for applications' own config files on the desktop (GIMP, VLC) and the
file VS Code's evaluation extension writes, following OSWorld's
`getters/gimp.py`, `getters/vlc.py` and `getters/vscode.py`.

Paths under `~` are expanded by the desktop's own Python (the user the apps run
as), then fetched into the trajectory folder under `dest`. A file that does not
exist raises FileNotFoundError, which `evaluate` scores 0.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from typing import Any

from cua_rl.atomic_file import write_bytes_atomic
from cua_rl.errors import GuestError
from cua_rl.evaluation.registry import Finding, GetterContext, getter


async def guest_home_path(ctx: GetterContext, relative: str) -> str:
    """`~/relative` as an absolute path on the desktop."""
    code = f"import os; print(os.path.expanduser({json.dumps('~/' + relative)}))"
    result = await ctx.client.execute(["python3", "-c", code], timeout=30.0)
    path = result.output.strip()
    if not result.ok or not path.startswith("/"):
        raise GuestError(f"cannot expand ~/{relative} on the desktop: {result.error.strip()}")
    return path


async def fetch_to_cache(ctx: GetterContext, path: str, dest: str) -> str:
    """Copy a desktop file into the trajectory folder; its local path."""
    data = await ctx.client.get_file(path)
    if data is None:
        raise FileNotFoundError(f"{path} does not exist on the desktop")
    target = ctx.cache_dir / dest
    await asyncio.to_thread(write_bytes_atomic, target, data)
    return str(target)


def check_dest(config: Mapping[str, Any]) -> list[Finding]:
    dest = config["dest"]
    if not isinstance(dest, str) or not dest or "/" in dest or dest in (".", ".."):
        return [(".dest", f"a bare file name inside the cache folder, got {dest!r}")]
    return []


def _check_gimp(config: Mapping[str, Any]) -> list[Finding]:
    name = config["file_name"]
    problems = check_dest(config)
    if not isinstance(name, str) or not name or "/" in name:
        problems.append((".file_name", f"a file name in ~/.config/GIMP/2.10, got {name!r}"))
    return problems


@getter("gimp_config_file", required=("file_name", "dest"), check=_check_gimp)
async def gimp_config_file(ctx: GetterContext, config: dict[str, Any]) -> str:
    """`~/.config/GIMP/2.10/<file_name>` (gimprc, sessionrc, ...)."""
    path = await guest_home_path(ctx, f".config/GIMP/2.10/{config['file_name']}")
    return await fetch_to_cache(ctx, path, config["dest"])


@getter("vlc_config", required=("dest",), check=check_dest)
async def vlc_config(ctx: GetterContext, config: dict[str, Any]) -> str:
    """VLC's settings file `~/.config/vlc/vlcrc` (Linux desktops)."""
    path = await guest_home_path(ctx, ".config/vlc/vlcrc")
    return await fetch_to_cache(ctx, path, config["dest"])


def _check_vscode(config: Mapping[str, Any]) -> list[Finding]:
    problems = check_dest(config)
    for key in ("vscode_extension_command", "path"):
        if not isinstance(config[key], str) or not config[key]:
            problems.append((f".{key}", "a non-empty string"))
    return problems


VSCODE_FILE_DEADLINE_S = 5.0
"""How long the extension may take to write its file after the command runs
(OSWorld sleeps one second, then reads once)."""


@getter("vscode_config", required=("vscode_extension_command", "path", "dest"), check=_check_vscode)
async def vscode_config(ctx: GetterContext, config: dict[str, Any]) -> str:
    """Run a command of OSWorld's VS Code evaluation extension through the command
    palette (ctrl+shift+p, type it, enter); the file it writes at `path`."""
    command = json.dumps(config["vscode_extension_command"])
    await ctx.client.act(
        "import time; pyautogui.hotkey('ctrl', 'shift', 'p'); time.sleep(0.5); "
        f"pyautogui.typewrite({command}); time.sleep(0.5); pyautogui.press('enter')",
        timeout=30.0,
    )
    end = time.monotonic() + VSCODE_FILE_DEADLINE_S
    while True:
        try:
            return await fetch_to_cache(ctx, config["path"], config["dest"])
        except FileNotFoundError:
            if time.monotonic() >= end:
                raise
        await asyncio.sleep(0.25)
