"""Serve 127.0.0.1:PORT on the host from a desktop's Unix socket, never through a link.

Desktops reach the host through Unix sockets in a directory they can write to
(local: the sandbox's socket dir; container: the run dir). The host side must not
trust what is there: an agent can swap `guest.sock` for a symlink to any socket
the forwarder could reach (another desktop's, the container engine's). So every
connection opens the path with O_PATH|O_NOFOLLOW, checks that it is a socket and
connects to that inode through /proc/self/fd (docs/sandbox.md). Each TCP
connection opens its own Unix connection, so a guest that restarts (a reset) is
reached again without restarting the forwarder.

Runnable on its own (`python -m cua_rl.desktop.unix_forward --forward PORT:PATH
...`, the local desktops' host side); the container provider's forwarder adds its
owner watch on top of `serve_forwards`. Stdlib only: it starts with every desktop.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import os
import signal
import socket
import stat
from collections.abc import Awaitable, Callable, Mapping

CONNECT_TIMEOUT_S = 5.0
_PR_SET_PDEATHSIG = 1
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(1 << 16):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(OSError, RuntimeError):
            writer.write_eof() if writer.can_write_eof() else writer.close()


def _open_socket_inode(socket_path: str) -> int:
    """An O_PATH descriptor of `socket_path` itself; OSError for a link or a non-socket."""
    fd = os.open(socket_path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    if not stat.S_ISSOCK(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"{socket_path} is not a socket (a symlink is never followed)")
    return fd


def connect_no_follow(socket_path: str) -> socket.socket:
    """A connected (then non-blocking) Unix socket to `socket_path` itself: a
    symlink there (or anything but a socket) raises OSError instead of being followed."""
    fd = _open_socket_inode(socket_path)
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(CONNECT_TIMEOUT_S)
            sock.connect(f"/proc/self/fd/{fd}")  # the inode opened above, not the path
            sock.setblocking(False)
        except BaseException:
            sock.close()
            raise
        return sock
    finally:
        os.close(fd)


async def _connect_no_follow_async(socket_path: str) -> socket.socket:
    """`connect_no_follow` on the event loop (no thread: a forwarder that dropped
    its privileges must not need to import anything more)."""
    fd = _open_socket_inode(socket_path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, f"/proc/self/fd/{fd}")
    except BaseException:
        sock.close()
        raise
    finally:
        os.close(fd)
    return sock


def handler(socket_path: str) -> Handler:
    """A `start_server` callback piping each TCP connection to `socket_path`."""

    async def forward(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            sock = await asyncio.wait_for(_connect_no_follow_async(socket_path), CONNECT_TIMEOUT_S)
            ureader, uwriter = await asyncio.open_unix_connection(sock=sock)
        except (TimeoutError, OSError):
            writer.close()  # the guest is not up (yet), or a link: the client sees a reset
            return
        try:
            await asyncio.gather(_pipe(reader, uwriter), _pipe(ureader, writer))
        finally:
            for w in (writer, uwriter):
                w.close()

    return forward


def drop_privileges(uid: int, gid: int) -> None:
    """Become `uid:gid` with no supplementary groups (irreversibly)."""
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)


def tie_to_parent(parent: int) -> None:
    """SIGTERM this process when `parent` exits, also by SIGKILL: a desktop's
    launcher stops its forwarder on any other exit, but a launcher SIGKILLed (a Ray
    node killed with its workers and their children) would leave it serving. Set
    after dropping privileges, which clears it."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:  # it died before we asked
        os.kill(os.getpid(), signal.SIGTERM)


async def serve_forwards(
    forwards: Mapping[int, str],
    until: Callable[[], Awaitable[object]] | None = None,
    user: tuple[int, int] | None = None,
    parent: int | None = None,
) -> bool:
    """Listen on 127.0.0.1:port for each `{port: socket_path}` until SIGTERM/SIGINT
    (returns True) or `until()` returns (False). With `user`, privileges are
    dropped to that uid:gid once the listeners are bound; with `parent`, the
    process ends when that one does (`tie_to_parent`)."""
    servers = [
        await asyncio.start_server(handler(path), "127.0.0.1", port, reuse_address=True)
        for port, path in forwards.items()
    ]
    if user is not None:
        drop_privileges(*user)
    if parent is not None:
        tie_to_parent(parent)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    waiters = [asyncio.ensure_future(stop.wait())]
    if until is not None:
        waiters.append(asyncio.ensure_future(until()))
    try:
        _, pending = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
    finally:
        for server in servers:
            server.close()
    return stop.is_set()


def _forward_arg(text: str) -> tuple[int, str]:
    port, sep, path = text.partition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536 or not path:
        raise argparse.ArgumentTypeError(f"expected PORT:SOCKET_PATH, got {text!r}")
    return int(port), path


def _user_arg(text: str) -> tuple[int, int]:
    uid, sep, gid = text.partition(":")
    if not sep or not uid.isdigit() or not gid.isdigit():
        raise argparse.ArgumentTypeError(f"expected UID:GID, got {text!r}")
    return int(uid), int(gid)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="unix_forward", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--forward",
        type=_forward_arg,
        action="append",
        required=True,
        help="PORT:SOCKET_PATH, serve 127.0.0.1:PORT from that socket",
    )
    parser.add_argument(
        "--user", type=_user_arg, help="UID:GID to drop to once listening (started as root)"
    )
    args = parser.parse_args(argv)
    asyncio.run(serve_forwards(dict(args.forward), user=args.user, parent=os.getppid()))


if __name__ == "__main__":
    main()
