"""Who a local desktop's session runs as, and the environment it sees: the
unprivileged `user` of OSWorld's image (password `password`, home /home/user),
a D-Bus session bus with AT-SPI enabled, and Chromium under the name
`google-chrome` (docs/osworld-local.md says what else matches the image).

Why not root: VLC refuses to start as root, `gsettings` needs a session bus it
owns, and a task's `sudo` must never mean root on the host. `user` gets no sudo
(no sudoers entry): the desktop's `sudo` is a script that runs the command as
`user` and answers `apt install` from the host's packages (`local.sudo`), and
tasks whose setup needs real root are reported `needs_root` by `cua-rl tasks check`.

Stdlib only: the session launcher imports this on every (re)start.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from dataclasses import dataclass
from typing import Any

from cua_rl.desktop.providers.local.sandbox import CHROME_EXE, SHIM_BIN
from cua_rl.images.chrome_launcher import chrome_launcher

DESKTOP_USER = "user"
DESKTOP_PASSWORD = "password"
"""OSWorld's image has this account; tasks type the password into dialogs."""

CHROMIUM_NAMES = ("chromium", "chromium-browser")


@dataclass(frozen=True, slots=True)
class DesktopUser:
    """The account a desktop's processes run as."""

    name: str
    uid: int
    gid: int

    @classmethod
    def lookup(cls, name: str) -> DesktopUser:
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            raise RuntimeError(
                f"desktop user {name!r} does not exist (the local provider "
                "creates it on start; see docs/osworld-local.md)"
            ) from None
        return cls(name, entry.pw_uid, entry.pw_gid)

    def popen_kwargs(self) -> dict[str, Any]:
        """`subprocess.Popen` arguments that drop to this user (no supplementary groups)."""
        return {"user": self.uid, "group": self.gid, "extra_groups": []}


def ensure_desktop_user(name: str = DESKTOP_USER, password: str = DESKTOP_PASSWORD) -> None:
    """Create the account if missing (needs root, which the provider needs anyway).

    Raises RuntimeError naming the command that failed."""
    try:
        pwd.getpwnam(name)
        return
    except KeyError:
        pass
    steps = (
        (
            [
                "useradd",
                "--no-create-home",
                "--home-dir",
                "/home/user",
                "--shell",
                "/bin/bash",
                "--user-group",
                name,
            ],
            None,
        ),
        (["chpasswd"], f"{name}:{password}\n"),
    )
    for argv, stdin in steps:
        if shutil.which(argv[0]) is None:
            raise RuntimeError(
                f"cannot create desktop user {name!r}: `{argv[0]}` not found "
                "(apt-get install passwd)"
            )
        done = subprocess.run(argv, input=stdin, capture_output=True, text=True, check=False)
        if done.returncode != 0 and not (argv[0] == "useradd" and done.returncode == 9):
            raise RuntimeError(
                f"cannot create desktop user {name!r}: {' '.join(argv)} "
                f"exited {done.returncode}: {done.stderr.strip()}"
            )


def chown_tree(root: str, user: DesktopUser) -> None:
    """Give the whole home to `user` (templates are written by root)."""
    os.lchown(root, user.uid, user.gid)
    for parent, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            os.lchown(os.path.join(parent, name), user.uid, user.gid)


CHROMIUM_BINARIES = (
    "/usr/lib/chromium/chromium",
    "/usr/lib/chromium-browser/chromium-browser",
    "/usr/lib64/chromium-browser/chromium-browser",
)
"""Where distributions install Chromium's executable behind their `chromium` wrapper."""


def chrome_shim() -> str:
    """The desktop's `google-chrome` (`images.chrome_launcher`), execing Chromium's
    executable bound at `CHROME_EXE`."""
    return chrome_launcher(CHROME_EXE, f"{SHIM_BIN}/google-chrome")


def chromium_binary() -> str | None:
    """Chromium's executable when the host has no real google-chrome (then the
    desktop gets the shim and `CHROME_EXE`), else None."""
    if shutil.which("google-chrome") is not None:
        return None
    for path in CHROMIUM_BINARIES:
        if os.access(path, os.X_OK):
            return path
    for name in CHROMIUM_NAMES:  # a distribution that puts the executable itself on PATH
        found = shutil.which(name)
        if found:
            with open(found, "rb") as fh:
                if fh.read(4) == b"\x7fELF":
                    return os.path.realpath(found)
    return None
