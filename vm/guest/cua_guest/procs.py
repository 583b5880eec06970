"""Running commands without blocking the event loop, keeping partial output.

A command runs in its own session so that on timeout the whole process group
(the shell and everything it started) is killed; whatever it printed until then
is returned. Processes started by /setup/launch are tracked and reaped instead,
so that launched applications never linger as zombies.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from dataclasses import dataclass

#: After a process exits, how long to keep reading its pipes: a background child
#: that inherited them could otherwise hold the request open until the deadline.
DRAIN_GRACE_S = 0.2
#: Bytes of each of a command's stdout and stderr kept for the answer.
MAX_OUTPUT_BYTES = 1 << 20


@dataclass(frozen=True)
class ProcResult:
    """What a finished (or killed) command produced."""

    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool


class CommandNotRunnable(Exception):
    """The executable is missing or cannot be executed (the message names it).

    A fault of the request, not of the server: routes answer `status` (404 for a
    missing program, 403 when it may not be run), never 500, which OSWorld's
    clients read as the guest failing."""

    def __init__(self, argv0: str, exc: OSError) -> None:
        super().__init__(f"cannot run {argv0!r}: {exc.strerror or exc}")
        self.status = 403 if isinstance(exc, PermissionError) else 404


def shell_argv(command: list[str] | str) -> list[str]:
    """argv for shell=True, as subprocess does: `sh -c cmd [args...]`."""
    if isinstance(command, str):
        return ["/bin/sh", "-c", command]
    return ["/bin/sh", "-c", *command]


async def run_command(
    argv: list[str], *, timeout: float, cwd: str | None = None, merge_stderr: bool = False
) -> ProcResult:
    """Run argv to completion or until `timeout` seconds pass, then kill its group."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT if merge_stderr else asyncio.subprocess.PIPE,
            cwd=cwd,
            start_new_session=True,
        )
    except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
        raise CommandNotRunnable(argv[0], exc) from None

    out, err = bytearray(), bytearray()
    pumps = [asyncio.create_task(_pump(proc.stdout, out))]
    if proc.stderr is not None:
        pumps.append(asyncio.create_task(_pump(proc.stderr, err)))
    timed_out = False
    try:
        await asyncio.wait_for(proc.wait(), timeout)
    except TimeoutError:
        timed_out = True
        _kill_group(proc.pid)
        await proc.wait()
    finally:
        if proc.returncode is None:  # cancelled: never leave the command running
            _kill_group(proc.pid)
        await asyncio.wait(pumps, timeout=DRAIN_GRACE_S)
        for pump in pumps:
            pump.cancel()
    return ProcResult(
        returncode=proc.returncode,
        stdout=out.decode(errors="replace"),
        stderr=err.decode(errors="replace"),
        timed_out=timed_out,
    )


async def _pump(stream: asyncio.StreamReader | None, sink: bytearray) -> None:
    """Copy a pipe into a buffer until EOF (kept incrementally for partial output),
    at most `MAX_OUTPUT_BYTES`: the rest is read and dropped, so `yes` ends at its
    timeout with a bounded answer instead of filling the guest's memory."""
    if stream is None:
        return
    dropped = 0
    while chunk := await stream.read(65536):
        room = MAX_OUTPUT_BYTES - len(sink)
        sink += chunk[: max(room, 0)]
        dropped += max(len(chunk) - max(room, 0), 0)
    if dropped:
        sink += f"\n[cua-guest: {dropped} more bytes of output dropped]\n".encode()


def _kill_group(pid: int) -> None:
    """SIGKILL a process group; it may already be gone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


class LaunchedApps:
    """Applications started by /setup/launch and /setup/open_file.

    They stay in the guest's process group (so stopping the guest's group stops
    them); `reap` (called on every launch and periodically by the app) collects
    the ones that exited so they do not stay zombies.
    """

    def __init__(self) -> None:
        self._procs: list[subprocess.Popen[bytes]] = []

    def launch(self, argv: list[str]) -> subprocess.Popen[bytes]:
        """Start argv detached from our pipes; raise CommandNotRunnable if it can't start."""
        self.reap()
        try:
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
        except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
            raise CommandNotRunnable(argv[0], exc) from None
        self._procs.append(proc)
        return proc

    def reap(self) -> None:
        """Forget (and wait for) the processes that have exited."""
        self._procs = [p for p in self._procs if p.poll() is None]

    def terminate_all(self) -> None:
        """Stop everything still running (guest shutdown)."""
        for proc in self._procs:
            if proc.poll() is None:
                proc.terminate()
        self._procs.clear()
