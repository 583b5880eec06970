"""The host side of a container desktop's guest: forwards 127.0.0.1:PORT to the
guest's Unix socket in the desktop's run dir, and watches the run that owns it.

Run as its own process (`python -m cua_rl.desktop.providers.container_forward`,
leader of a new session) so a desktop outlives the command that started it
(`cua-rl vm up`). With `--owner-pid`, when that process is gone (even killed by
SIGKILL) it removes the container and exits: nothing of a dead run keeps running.
Each connection opens its own Unix connection, so a container replaced by a
reset is reached again without restarting the forwarder. The socket's directory
is writable from inside the desktop, so the forwarder (root on the host) never
follows a symlink there: an agent that swaps guest.sock for a link to a host
socket (the engine's, another desktop's) gets a refused connection instead.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket
import stat
import subprocess

CONNECT_TIMEOUT_S = 5.0


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


def connect_no_follow(socket_path: str) -> socket.socket:
    """A connected Unix socket to `socket_path` itself: a symlink there (or
    anything but a socket) raises OSError instead of being followed."""
    fd = os.open(socket_path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if not stat.S_ISSOCK(os.fstat(fd).st_mode):
            raise OSError(f"{socket_path} is not a socket (a symlink is never followed)")
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


def handler(socket_path: str):
    async def forward(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            sock = await asyncio.wait_for(
                asyncio.to_thread(connect_no_follow, socket_path), CONNECT_TIMEOUT_S)
            ureader, uwriter = await asyncio.open_unix_connection(sock=sock)
        except (TimeoutError, OSError):
            writer.close()  # the guest is not up (yet): the client sees a reset, retries
            return
        try:
            await asyncio.gather(_pipe(reader, uwriter), _pipe(ureader, writer))
        finally:
            for w in (writer, uwriter):
                w.close()
    return forward


async def _owner_gone(pid: int) -> None:
    """Returns when process `pid` has exited (a pidfd becomes readable then)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    gone = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_reader(fd, gone.set)
    try:
        await gone.wait()
    finally:
        loop.remove_reader(fd)
        os.close(fd)


async def serve(port: int, socket_path: str, owner_pid: int | None, container: str,
                engine: str) -> None:
    server = await asyncio.start_server(handler(socket_path), "127.0.0.1", port,
                                        reuse_address=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    waiters = [asyncio.create_task(stop.wait())]
    if owner_pid is not None:
        waiters.append(asyncio.create_task(_owner_gone(owner_pid)))
    async with server:
        done, pending = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
    if not stop.is_set():  # the owner died: take its desktop with it
        await asyncio.to_thread(subprocess.run, [engine, "rm", "--force", container],
                                capture_output=True, timeout=60)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="container_forward")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--socket", required=True)
    parser.add_argument("--container", required=True)
    parser.add_argument("--engine", default="docker")
    parser.add_argument("--owner-pid", type=int)
    args = parser.parse_args(argv)
    asyncio.run(serve(args.port, args.socket, args.owner_pid, args.container, args.engine))


if __name__ == "__main__":
    main()
