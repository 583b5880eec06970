"""On-disk state of local desktops: records, display locks, ports (the home
template is `local.home`).

Layout under the state dir (shared by every `cua-rl` process on the machine):

    (display locks live machine-wide under display_lock_root(), not here)
    home-template/           default home template, built on first use
    <id>/state.json          `DesktopRecord` of a running desktop
    <id>/token               guest bearer token (0600)
    <id>/home/               the desktop's /home/user
    <id>/session.log         launcher, Xvfb, window manager and guest output

A display lock is an flock, not a pid file: the launcher inherits the locked
descriptor and the kernel drops the lock when the launcher dies, so a crashed
desktop never leaks its display number.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import secrets
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cua_rl.desktop.providers.local.sandbox import STAGE
from cua_rl.desktop.providers.records import JsonRecord, load_all
from cua_rl.net_ports import pick_port

_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def check_desktop_id(desktop_id: str) -> str:
    """Ids name directories, so only a safe subset of characters is allowed."""
    if not _ID_RE.match(desktop_id):
        raise ValueError(
            f"desktop id {desktop_id!r}: expected 1-64 of [A-Za-z0-9_.-], not starting "
            "with '.', '_' or '-'"
        )
    return desktop_id


@dataclass(slots=True)
class DesktopRecord(JsonRecord):
    """What a later `cua-rl` process needs to find, reach and stop a desktop."""

    id: str
    url: str
    token: str
    port: int
    display: int
    pid: int
    """Session launcher pid; also its process group id (it leads a new session)."""
    pgid: int
    start_time: float
    """Launcher start time (psutil create_time) so a reused pid is not mistaken for it."""
    mnt_ns: str
    """`mnt:[inode]` of the desktop's mount namespace; finds escaped processes."""
    home: str
    log: str
    cdp_port: int = 0
    """Host port forwarded to Chromium's DevTools port 9222 inside (0: none)."""


def list_records(state_dir: Path) -> list[DesktopRecord]:
    """Every recorded desktop (alive or not), sorted by id."""
    return load_all(state_dir, DesktopRecord)


RESERVED_DIRS = ("home-template", "locks", "container", "qemu")
"""Directories of the state dir that are not desktops (`container/` and `qemu/` hold
those providers' desktops when `$CUA_RL_STATE_DIR` is the local state dir)."""

STARTING_GRACE_S = 600.0
"""A desktop dir with no record and no owner younger than this may be starting now."""


def pid_alive(pid: int) -> bool:
    """True while a process with this pid exists (not a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def desktop_owner(desktop_dir: Path) -> int | None:
    """Pid of the run that started the desktop (its session spec's `owner_pid`);
    None for desktops started by hand (`vm up`) or an unreadable spec."""
    try:
        owner = json.loads((desktop_dir / "session.json").read_text()).get("owner_pid")
    except (OSError, ValueError, AttributeError):
        return None
    return owner if isinstance(owner, int) and owner > 0 else None


@dataclass(frozen=True, slots=True)
class DesktopState:
    """What `vm list` and `vm down` need to know about one desktop dir."""

    id: str
    record: DesktopRecord | None
    owner_pid: int | None
    launcher_alive: bool
    owner_alive: bool
    stale: str
    """Why the dir is stale ('' when it is not): its desktop is gone or its run is."""


def desktop_states(
    state_dir: Path, launcher_alive: Callable[[DesktopRecord], bool], *, now: float | None = None
) -> list[DesktopState]:
    """Every desktop dir of `state_dir` (recorded or not), sorted by id, with why it
    is stale: the launcher died, the run that owns it is gone (its desktops stop
    themselves but leave their dirs), or a start that never finished long ago."""
    if not state_dir.is_dir():
        return []
    now = time.time() if now is None else now
    out = []
    for ddir in sorted(state_dir.iterdir()):
        if not ddir.is_dir() or ddir.name in RESERVED_DIRS or not _ID_RE.match(ddir.name):
            continue
        record = DesktopRecord.load(ddir)
        owner = desktop_owner(ddir)
        alive = record is not None and launcher_alive(record)
        owner_alive = owner is not None and pid_alive(owner)
        if record is not None and not alive:
            stale = f"its desktop (launcher pid {record.pid}) is gone"
        elif owner is not None and not owner_alive:
            stale = f"its run (pid {owner}) is gone"
        elif record is None and owner is None and now - _mtime(ddir) > STARTING_GRACE_S:
            stale = "a start that never finished"
        else:
            stale = ""
        out.append(DesktopState(ddir.name, record, owner, alive, owner_alive, stale))
    return out


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def write_token(path: Path) -> str:
    """A fresh random token in a file only root can read (created 0600, never wider)."""
    token = secrets.token_urlsafe(24)
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(token)
    return token


# displays -----------------------------------------------------------------------


def x_displays_in_use() -> set[int]:
    """Display numbers whose X socket exists anywhere on the machine.

    The abstract socket namespace is per network namespace, not per mount
    namespace, so /proc/net/unix shows every X server, ours and others'.
    """
    try:
        used = parse_x_sockets(Path("/proc/net/unix").read_text())
    except OSError:
        used = set()
    for lock in Path("/tmp").glob(".X*-lock"):
        if lock.name[2:-5].isdigit():
            used.add(int(lock.name[2:-5]))
    return used


def parse_x_sockets(proc_net_unix: str) -> set[int]:
    """Display numbers of the X sockets (`@/tmp/.X11-unix/X<n>` or the path form)
    listed in the text of /proc/net/unix."""
    return {
        int(m.group(1))
        for m in re.finditer(r"/tmp/\.X11-unix/X(\d+)$", proc_net_unix, re.MULTILINE)
    }


class DisplayLock:
    """An exclusively flocked lock file for one X display number."""

    def __init__(self, number: int, fd: int) -> None:
        self.number = number
        self.fd = fd

    def release(self) -> None:
        """Close our descriptor; the lock persists while the launcher holds its copy."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def display_lock_root() -> Path:
    """Machine-wide root of the display locks: every provider on this machine,
    whatever its state dir, must see the same locks, or two runs race for :n."""
    env = os.environ.get("CUA_RL_DISPLAY_LOCKS")
    return Path(env) if env else Path(tempfile.gettempdir()) / "cua-rl-displays"


def allocate_display(
    state_dir: Path, first: int, *, prefer: int | None = None, count: int = 2000
) -> DisplayLock:
    """Lock the lowest free display number >= first (or `prefer` when free)."""
    lock_dir = state_dir / "locks"
    lock_dir.mkdir(parents=True, exist_ok=True)
    in_use = x_displays_in_use()
    candidates = range(first, first + count)
    if prefer is not None:
        candidates = [prefer, *candidates]
    for number in candidates:
        if number in in_use:
            continue
        fd = os.open(lock_dir / f"display-{number}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return DisplayLock(number, fd)
    raise RuntimeError(f"no free X display number in {first}..{first + count - 1}")


# ports and homes ------------------------------------------------------------------


def free_port(prefer: int | None = None) -> int:
    """A TCP port on 127.0.0.1 that can be bound now (`prefer` when it can), outside
    the kernel's ephemeral range (net_ports.py says why). Nothing keeps it free:
    callers that can hold it use `net_ports.reserve_port`, and a start that finds it
    taken is retried on another (`net_ports.port_taken`).

    `prefer` is checked with SO_REUSEADDR like the guest server's listener, so a port
    of a just-killed guest (TIME_WAIT) counts as free and a reset keeps its URL.
    """
    return pick_port("127.0.0.1", prefer=prefer)


def live_home(record: DesktopRecord) -> str:
    """Where the host sees the running desktop's /home/user: the launcher's staged
    home through its own mount namespace (`/proc/PID/root/run/cua-rl-stage/home`;
    with limits a size-capped tmpfs the state dir's home was copied into), or the
    state dir's home when the launcher is not running."""
    staged = f"/proc/{record.pid}/root{STAGE}/home"
    return staged if os.path.isdir(staged) else record.home
