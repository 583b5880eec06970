"""On-disk record and process control of `qemu` desktops.

Layout under the provider's state dir (shared by every `cua-rl` process):

    <id>/state.json      `QemuRecord` of a running VM
    <id>/overlay.qcow2   the VM's copy-on-write overlay of the base image
    <id>/qemu.log        QEMU's output

QEMU runs as the leader of its own session, so its process group is the VM and
killing the group leaves nothing behind.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from cua_rl.desktop.providers.local.log import sanitize
from cua_rl.desktop.providers.process_core import STOP_DEADLINE_S
from cua_rl.desktop.providers.records import JsonRecord
from cua_rl.errors import DesktopError


@dataclass(slots=True)
class QemuRecord(JsonRecord):
    """What a later `cua-rl` process needs to find, reach and stop a VM."""

    id: str
    url: str
    port: int
    cdp_port: int
    vnc_port: int | None
    pid: int
    start_time: float
    """QEMU's start time (clock ticks since boot) so a reused pid is not mistaken for it."""
    overlay: str
    log: str
    kvm: bool
    token: str | None = None
    """Guest token of our images (given on the kernel command line); None for OSWorld's."""
    qmp: str | None = None
    """QMP socket of the VM (snapshot save/restore)."""
    snapshot: bool = False
    """True once the `ready` snapshot of the booted desktop is saved in the overlay."""
    active: str | None = None
    """The overlay the VM runs on when it was started from a fork point (`forks.py`):
    a child of the fork's frozen disk; None: its own `overlay`, which still holds the
    `ready` snapshot a reset returns to."""
    fork: str | None = None
    """The fork point the VM was restored from, while `active` is set."""
    home_token: str | None = None
    """The guest token of the VM's own boot (`token` is the fork point's while it runs
    a fork: the restored memory holds the guest that was saved)."""


def kill_vm(record: QemuRecord, child: subprocess.Popen | None = None) -> None:
    """SIGTERM QEMU's process group (QEMU exits at once on it), SIGKILL after a
    grace period, and wait until it is gone, so the overlay is free to delete.
    `child` is our Popen of it, if any, polled so it does not linger as a zombie."""
    for sig, grace in ((signal.SIGTERM, 3.0), (signal.SIGKILL, STOP_DEADLINE_S)):
        if not record.alive:
            return
        try:
            os.killpg(record.pid, sig)
        except ProcessLookupError:
            return
        end = time.monotonic() + grace
        while time.monotonic() < end:
            if child is not None:
                child.poll()
            if not record.alive:
                return
            time.sleep(0.02)
    if record.alive:
        raise DesktopError(f"qemu pid {record.pid} survives SIGKILL")


def spawn(argv: list[str], log_path: Path, pass_fds: tuple[int, ...] = ()) -> subprocess.Popen:
    """Start QEMU as the leader of a new session, so it survives the CLI that
    started it and its process group is the VM; `pass_fds` stay open in it."""
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd="/",
            pass_fds=pass_fds,
        )


def bindable(host: str, port: int) -> int | None:
    """The port if it can be bound on `host` now (0: any free one), else None.
    SO_REUSEADDR like QEMU's listener, so a just-killed VM's port counts as free
    and a reset keeps its URL."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return None
        return sock.getsockname()[1]


def tail(path: Path, size: int = 3000) -> str:
    """The log's last `size` bytes, printable only (a VM's console is the guest's words)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(max(fh.seek(0, 2) - size, 0))
            return sanitize(fh.read(size).decode(errors="replace"))
    except OSError:
        return "(no log)"
