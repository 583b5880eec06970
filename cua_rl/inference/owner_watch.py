"""Model servers a run launches exit when the run's process dies, even by SIGKILL.

The launcher starts replicas in their own session (so a Ctrl-C in the terminal
reaches the run, which then stops them in order), which also means nothing kills
them when the run is killed outright: they would hold ports, memory and threads
until someone finds them. The launcher therefore names itself in the child's
environment, and the server watches that pid through a pidfd (no polling) and
shuts down the way SIGTERM does. A server that replaces itself with another
program (`vllm serve`) cannot run a watch; it asks the kernel for SIGTERM when its
parent, the owner, dies (PR_SET_PDEATHSIG survives exec). A server started by hand
has no owner and serves until interrupted.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import signal
from collections.abc import Callable

OWNER_ENV = "CUA_RL_OWNER_PID"


def owner_env() -> dict[str, str]:
    """Environment entries that bind a child server's life to this process."""
    return {OWNER_ENV: str(os.getpid())}


def owner_pid() -> int | None:
    """The owning process named by the environment, if any (ignored when malformed)."""
    value = os.environ.get(OWNER_ENV, "")
    return int(value) if value.isdigit() and int(value) > 1 else None


def terminate_self() -> None:
    """Ask this process to stop as an operator's SIGTERM would (graceful cleanup)."""
    os.kill(os.getpid(), signal.SIGTERM)


async def exit_when_owner_dies(pid: int, on_exit: Callable[[], None] = terminate_self) -> None:
    """Wait until `pid` has exited, then call `on_exit` (at once if it is already gone)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        on_exit()
        return
    loop = asyncio.get_running_loop()
    gone = asyncio.Event()
    loop.add_reader(fd, gone.set)  # a pidfd becomes readable when its process exits
    try:
        await gone.wait()
    finally:
        loop.remove_reader(fd)
        os.close(fd)
    on_exit()


_PR_SET_PDEATHSIG = 1


def terminate_with_owner_across_exec() -> None:
    """Before an exec: get SIGTERM when the owner (this process's parent) dies.

    Exits at once when the owner is already gone. A no-op without an owner, or when
    the owner is alive but not the parent (the kernel's signal follows the parent)."""
    owner = owner_pid()
    if owner is None:
        return
    if os.getppid() == owner:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != owner and not _alive(owner):  # also: died before the request
        raise SystemExit(f"owner {owner} exited before the server started")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        pass
    return True
