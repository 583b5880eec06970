"""The root init of a container desktop: bind the guest's socket where the agent
cannot reach the path, then become the unprivileged `user` for good.

The container starts as root with only CAP_SETUID and CAP_SETGID (and
no-new-privileges). The run dir shared with the host (`$CUA_RUN_DIR`, /run/cua)
is root-owned 0755, so once this process has dropped to `user` nothing in the
desktop can rename, replace or create anything there: the host's forwarder
always reaches the socket bound here. The listening socket goes to the session
script as descriptor 3 (`CUA_GUEST_LISTEN=fd:3`), which hands it to the guest
only (`--listen-fd 3`; the guest then turns non-dumpable, so no process of the
agent can ptrace it for the descriptor). When the guest dies its socket is gone
with it: the path stays root's, nothing listens, the desktop fails its health
check and is reset. The token is the host's root-only file in the run dir; it
reaches the session in its environment (the session script writes the guest's
copy and unsets it). With `CUA_CDP_LISTEN=unix:PATH` it binds a second socket the
same way, for Chromium's DevTools, and hands it over as descriptor 4
(`CUA_CDP_LISTEN=fd:4`: the session pipes it to 9222 inside with
`cua_guest.fd_forward`, as local desktops do). Stdlib only: it runs from the
image's guest directory.
"""

from __future__ import annotations

import ctypes
import os
import pwd
import socket
import stat
import sys
from typing import NoReturn

LISTEN_FD = 3
CDP_FD = 4
USER = "user"
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4


def fail(message: str) -> NoReturn:
    print(f"cua-desktop init: {message}", file=sys.stderr, flush=True)
    sys.exit(2)


def read_token(run_dir: str) -> str:
    """The host's token file: a regular file (never followed), one non-empty line."""
    path = os.path.join(run_dir, "token")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        fail(f"cannot open {path}: {exc.strerror} (expected the host's token file)")
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            fail(f"{path} is not a regular file")
        token = os.read(fd, 4096).decode("ascii", "replace").strip()
    finally:
        os.close(fd)
    if not token or not token.isprintable() or " " in token:
        fail(f"{path}: expected one printable token without spaces")
    return token


def bind_listener(path: str, fd: int = LISTEN_FD) -> None:
    """A listening Unix socket at `path` (root's, 0600: only the host's root
    forwarder connects), duplicated onto `fd` and inheritable."""
    if os.path.lexists(path):  # the host empties the run dir; a leftover is root's own
        os.unlink(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    os.chmod(path, 0o600)
    sock.listen(128)
    if sock.fileno() == fd:  # the first free descriptor: keep it as is
        sock.detach()
        os.set_inheritable(fd, True)
    else:
        os.dup2(sock.fileno(), fd, inheritable=True)
        sock.close()  # `fd` stays: the only descriptor of the listener


def drop_to(user: str) -> pwd.struct_passwd:
    """Become `user` (real, effective and saved ids, no supplementary groups, no
    capabilities left), or exit: nothing of the agent may run as root."""
    entry = pwd.getpwnam(user)
    ctypes.CDLL(None, use_errno=True).prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    os.setgroups([])
    os.setresgid(entry.pw_gid, entry.pw_gid, entry.pw_gid)
    os.setresuid(entry.pw_uid, entry.pw_uid, entry.pw_uid)
    if set(os.getresuid()) != {entry.pw_uid} or os.getgroups() not in ([], [entry.pw_gid]):
        fail(f"could not drop to {user}")
    with open("/proc/self/status") as status:
        caps = {k: v.strip() for k, _, v in (line.partition(":") for line in status)}
    if any(int(caps.get(k, "0"), 16) for k in ("CapPrm", "CapEff", "CapAmb")):
        fail(f"{user} kept capabilities ({caps.get('CapPrm')})")
    return entry


def main(argv: list[str]) -> None:
    if len(argv) != 2:
        fail("usage: container_init SESSION_SCRIPT")
    run_dir = os.environ.get("CUA_RUN_DIR", "/run/cua")
    listen = os.environ.get("CUA_GUEST_LISTEN", f"unix:{run_dir}/guest.sock")
    if not listen.startswith("unix:/"):
        fail(f"CUA_GUEST_LISTEN={listen!r}: expected unix:/ABSOLUTE/PATH")
    cdp = os.environ.get("CUA_CDP_LISTEN", "")
    if cdp and not cdp.startswith("unix:/"):
        fail(f"CUA_CDP_LISTEN={cdp!r}: expected unix:/ABSOLUTE/PATH")
    token = read_token(run_dir)
    for path, fd in ((listen[len("unix:") :], LISTEN_FD), (cdp[len("unix:") :], CDP_FD)):
        if not path:
            continue
        try:
            bind_listener(path, fd)
        except OSError as exc:
            fail(
                f"cannot bind {path}: {exc.strerror} (the run dir must be owned by the "
                "container's root)"
            )
    entry = drop_to(USER)
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": entry.pw_dir,
        "USER": USER,
        "CUA_RUN_DIR": run_dir,
        "CUA_GUEST_LISTEN": f"fd:{LISTEN_FD}",
        "CUA_GUEST_TOKEN": token,
    }
    if cdp:
        env["CUA_CDP_LISTEN"] = f"fd:{CDP_FD}"
    for key in ("CUA_SCREEN_WIDTH", "CUA_SCREEN_HEIGHT"):
        if key in os.environ:
            env[key] = os.environ[key]
    os.chdir(entry.pw_dir)
    os.execve(argv[1], [argv[1]], env)


if __name__ == "__main__":
    main(sys.argv)
