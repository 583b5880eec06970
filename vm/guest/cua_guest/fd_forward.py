"""Forward connections accepted on an inherited listening socket to a TCP port inside.

Run as `python -m cua_guest.fd_forward FD HOST PORT`. A local desktop gets the
listening Unix socket of Chromium's DevTools forward from its launcher as a file
descriptor (the socket itself lives in a root-owned directory the desktop cannot
see or write: docs/sandbox.md), so nothing inside can rename, replace or create
the path the host connects to. Each accepted connection is piped to HOST:PORT.

Stdlib only; it marks itself non-dumpable so that other processes of the desktop
user cannot ptrace it or copy its listening descriptor (`pidfd_getfd`).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import socket
import sys

_PR_SET_DUMPABLE = 4
CONNECT_TIMEOUT_S = 5.0
CHUNK = 1 << 16


def not_dumpable() -> None:
    """Deny ptrace, /proc/PID/mem and pidfd_getfd to same-uid processes (best effort)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(OSError, RuntimeError):
            writer.close()


async def _serve(fd: int, host: str, port: int) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_r, up_w = await asyncio.wait_for(
                asyncio.open_connection(host, port), CONNECT_TIMEOUT_S
            )
        except (OSError, TimeoutError):
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_w), _pipe(up_r, writer))

    listener = socket.socket(fileno=fd)
    listener.setblocking(False)
    server = await asyncio.start_unix_server(handle, sock=listener)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3 or not args[0].isdigit() or not args[2].isdigit():
        sys.exit("usage: python -m cua_guest.fd_forward FD HOST PORT")
    not_dumpable()
    asyncio.run(_serve(int(args[0]), args[1], int(args[2])))


if __name__ == "__main__":
    main()
