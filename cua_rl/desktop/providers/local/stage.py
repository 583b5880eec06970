"""What the session launcher prepares, as root in its private mount namespace,
before it starts a local desktop's sandbox (docs/sandbox.md).

Under `STAGE` (a tmpfs of that namespace: invisible to the host and to other
desktops) it puts the desktop's home, the guest venv and the socket directory:

- the home: with limits, a size-capped tmpfs filled from the desktop's home
  under the state dir (the template copy the provider restores on reset), so the
  agent's files live in RAM counted in the desktop's memory limit and a disk fill
  ends at `home_mb`; without limits, a bind of that host directory (the
  behaviour before issue 29, for comparisons);
- the guest venv: bound read-only into the sandbox later;
- `sock/`: root's, made new on every start and never bound into the sandbox; the
  launcher binds the forwarded sockets there (`listen_socket`) and hands the
  sandbox only their listening descriptors.

Stdlib only: the launcher imports it on every start.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import socket

from cua_rl.desktop.providers.local.sandbox import STAGE
from cua_rl.desktop.providers.local.user import DesktopUser, chown_tree

_MS_NOSUID, _MS_NODEV, _MS_BIND = 2, 4, 4096


def data_fd(data: str | bytes) -> int:
    """A pipe's read end holding `data` (bwrap copies it into a file inside, or
    reads the seccomp program from it)."""
    read_fd, write_fd = os.pipe()
    with os.fdopen(write_fd, "wb") as fh:  # small: fits the pipe buffer, never blocks
        fh.write(data.encode() if isinstance(data, str) else data)
    return read_fd


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    def enc(text: str | None) -> bytes | None:
        return text.encode() if text is not None else None

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source} on {target}: {os.strerror(err)}")


def stage(home: str, guest_venv: str, user: DesktopUser, home_bytes: int = 0) -> str:
    """Prepare `STAGE` (see the module doc); `home_bytes` > 0 makes the home a tmpfs
    of that size. Returns the socket directory."""
    os.makedirs(STAGE, mode=0o755, exist_ok=True)  # an empty mount point on the host
    _mount("tmpfs", STAGE, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=755,size=64k")
    target = f"{STAGE}/home"
    os.mkdir(target, 0o755)
    if home_bytes > 0:
        _mount(
            "tmpfs",
            target,
            "tmpfs",
            _MS_NOSUID | _MS_NODEV,
            f"size={home_bytes},mode=755,uid={user.uid},gid={user.gid}",
        )
        shutil.copytree(home, target, symlinks=True, dirs_exist_ok=True)
    else:
        _mount(home, target, None, _MS_BIND, None)
    chown_tree(target, user)
    os.mkdir(f"{STAGE}/guest", 0o755)
    _mount(guest_venv, f"{STAGE}/guest", None, _MS_BIND, None)
    sock_dir = f"{STAGE}/sock"
    os.mkdir(sock_dir, 0o755)
    return sock_dir


def listen_socket(path: str, user: DesktopUser) -> socket.socket:
    """A listening Unix socket at `path`, bound by root and connectable only by
    `user` (the host forwarder drops to that uid); inheritable, for the sandbox."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    os.chown(path, user.uid, user.gid)
    os.chmod(path, 0o600)
    sock.listen(128)
    sock.set_inheritable(True)
    return sock
