"""The host side of a container desktop's guest: forwards 127.0.0.1:PORT to the
guest's Unix socket in the desktop's run dir, and watches the run that owns it.

Run as its own process (`python -m cua_rl.desktop.providers.container.forward`,
leader of a new session) so a desktop outlives the command that started it
(`cua-rl vm up`). With `--owner-pid`, when that process is gone (even killed by
SIGKILL) it removes the container, unmounts the run dir's tmpfs and exits:
nothing of a dead run keeps running.
The forwarding itself (a new Unix connection per TCP connection, so a container
replaced by a reset is reached again; never following a symlink planted in the
writable run dir, since this runs as root on the host) is `cua_rl.desktop.unix_forward`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
from pathlib import Path

from cua_rl.desktop.providers.container.limits import unmount_run_dir
from cua_rl.desktop.unix_forward import connect_no_follow, serve_forwards

__all__ = ["connect_no_follow", "main", "serve"]


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


async def serve(
    port: int,
    socket_path: str,
    owner_pid: int | None,
    container: str,
    engine: str,
    more: dict[int, str] | None = None,
) -> None:
    """Serve `port` from `socket_path` (and each of `more`: port -> socket, e.g.
    Chromium's DevTools) until the owner is gone."""
    until = (lambda: _owner_gone(owner_pid)) if owner_pid is not None else None
    stopped = await serve_forwards({port: socket_path, **(more or {})}, until)
    if not stopped:  # the owner died: take its desktop with it, and its run dir's tmpfs
        await asyncio.to_thread(
            subprocess.run, [engine, "rm", "--force", container], capture_output=True, timeout=60
        )
        await asyncio.to_thread(unmount_run_dir, Path(socket_path).parent)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="cua_rl.desktop.providers.container.forward")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--socket", required=True)
    parser.add_argument("--container", required=True)
    parser.add_argument("--engine", default="docker")
    parser.add_argument("--owner-pid", type=int)
    parser.add_argument("--cdp-port", type=int)
    parser.add_argument("--cdp-socket")
    args = parser.parse_args(argv)
    more = {args.cdp_port: args.cdp_socket} if args.cdp_port and args.cdp_socket else {}
    asyncio.run(serve(args.port, args.socket, args.owner_pid, args.container, args.engine, more))


if __name__ == "__main__":
    main()
