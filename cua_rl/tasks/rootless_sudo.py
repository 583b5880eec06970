"""Which `sudo` commands a local desktop's rootless `sudo` carries out.

Local desktops answer `sudo` with a script (`desktop/providers/local/sudo.py`):
`apt`/`apt-get update` does nothing, `install` succeeds when the host has the
packages, and anything else runs as `user`. This module reads a task's command
the same way, without starting anything, so `cua-rl tasks check` counts a task
runnable exactly when its `sudo` steps would succeed there.

A command run as `user` counts only when it is one of `USER_COMMANDS` and every
path it names is in the home or /tmp: `sudo mkdir ~/Desktop/x` does what the
task wants, `sudo pip install ...` or `sudo su - charles` does not.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from pathlib import Path

USER_COMMANDS = frozenset({"mkdir", "touch", "cp", "mv", "rm", "chmod", "ln"})
"""Commands whose effect in the user's own folders is the same without root."""
USER_PATHS = ("~/", "/home/user/", "/tmp/")
"""Prefixes of the paths a command run as `user` may name (`~root/...` does not count)."""
SUDO_OPTIONS = frozenset(
    {
        "-S",
        "--stdin",
        "-E",
        "-H",
        "-k",
        "-n",
        "--preserve-env",
        "--set-home",
        "--reset-timestamp",
        "--non-interactive",
    }
)
"""The options the desktop's sudo accepts (any other makes it fail)."""
_SEGMENTS = re.compile(r"&&|\|\||;|\n")
DPKG_INFO = Path("/var/lib/dpkg/info")


def host_has_package(name: str, info: Path = DPKG_INFO) -> bool:
    """Whether Debian's package database lists `name` as installed (its file list
    exists, for the native or any architecture)."""
    if not re.fullmatch(r"[a-z0-9][a-z0-9+.-]*", name):
        return False
    return (info / f"{name}.list").exists() or any(info.glob(f"{name}:*.list"))


def _sudo_argv(segment: str) -> list[str] | None:
    """The command after `sudo` and its options in one `&&`/`;` segment, or None
    when the segment does not run sudo; [] when it cannot be read."""
    for part in segment.split("|"):
        try:
            words = shlex.split(part)
        except ValueError:
            return [] if "sudo" in part else None
        if words and words[0].rsplit("/", 1)[-1] == "sudo":
            argv = words[1:]
            while argv and argv[0] in SUDO_OPTIONS:
                argv = argv[1:]
            if argv and argv[0] == "--":
                argv = argv[1:]
            return [] if argv and argv[0].startswith("-") else argv
    return None


def rootless_problem(
    command: str, has_package: Callable[[str], bool] = host_has_package
) -> str | None:
    """Why the desktop's rootless `sudo` would fail some step of `command`, or None
    when every sudo in it would succeed (module docstring)."""
    for segment in _SEGMENTS.split(command):
        argv = _sudo_argv(segment)
        if argv is None:
            continue
        if not argv:
            return f"sudo with options or quoting this desktop cannot read: {segment.strip()}"
        tool, rest = argv[0].rsplit("/", 1)[-1], argv[1:]
        if tool in ("apt", "apt-get"):
            words = [w for w in rest if not w.startswith("-")]
            if words[:1] == ["update"] and len(words) == 1:
                continue
            if words[:1] == ["install"]:
                missing = [p for p in words[1:] if not has_package(p)]
                if missing:
                    return (
                        f"sudo {tool} install of package(s) the desktop lacks: {' '.join(missing)}"
                    )
                continue
            return f"sudo {tool} {' '.join(words[:1])} needs root"
        paths = [w for w in rest if not w.startswith("-")]
        if tool in USER_COMMANDS and paths and all(p.startswith(USER_PATHS) for p in paths):
            continue
        return f"sudo {' '.join(argv)[:100]} needs root"
    return None
