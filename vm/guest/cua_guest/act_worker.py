"""Host side of the persistent /act worker.

Invariant: at most one action runs at a time, and every call to `run` returns a
result dict; if the worker hangs past the timeout or dies, it is killed, a fresh
worker is started in the background, and the result says so (status "timeout"
or "error"). No interpreter starts on the hot path: one click is a pipe round
trip plus the X calls themselves.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from typing import Any

log = logging.getLogger(__name__)

#: Importing pyautogui takes well under a second; this only guards a broken setup.
STARTUP_TIMEOUT_S = 60.0
#: Replies can carry a lot of printed output.
PIPE_LIMIT = 64 * 1024 * 1024


class WorkerUnavailable(Exception):
    """The worker cannot start (e.g. pyautogui cannot open the display)."""


class ActWorker:
    """A long-lived `python -m cua_guest.act_child` process and its restarts."""

    def __init__(self, default_timeout: float, python: str = sys.executable) -> None:
        self.default_timeout = default_timeout
        self._python = python
        self._proc: asyncio.subprocess.Process | None = None
        self._starting: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    def start(self) -> None:
        """Begin starting a worker in the background (idempotent)."""
        if self._starting is None or self._starting.done():
            self._starting = asyncio.create_task(self._spawn())
            self._starting.add_done_callback(_log_start_failure)

    async def run(self, code: str, timeout: float | None = None) -> dict[str, Any]:
        """Run pyautogui code; return {status, output, error} (status success/error/timeout)."""
        timeout = self.default_timeout if timeout is None else timeout
        async with self._lock:
            proc = await self._ready()
            assert proc.stdin is not None and proc.stdout is not None
            try:
                proc.stdin.write((json.dumps({"code": code}) + "\n").encode())
                await proc.stdin.drain()
                line = await asyncio.wait_for(proc.stdout.readline(), timeout)
            except TimeoutError:
                await self._replace(proc)
                return {
                    "status": "timeout",
                    "output": "",
                    "error": f"the code ran longer than {timeout:g} s; "
                    "the worker was killed and replaced",
                }
            except (BrokenPipeError, ConnectionResetError):
                line = b""
            if not line:
                returncode = await proc.wait()
                await self._replace(proc)
                return {
                    "status": "error",
                    "output": "",
                    "error": f"the worker exited (code {returncode}) while running the code; "
                    "it was replaced",
                }
            return json.loads(line)

    async def close(self) -> None:
        """Kill the worker (guest shutdown)."""
        if self._starting is not None:
            self._starting.cancel()
            with contextlib.suppress(BaseException):
                await self._starting
        if self._proc is not None:
            _kill(self._proc)
            await self._proc.wait()
            self._proc = None

    async def _ready(self) -> asyncio.subprocess.Process:
        """The running worker, waiting for (or starting) one if needed."""
        if self._proc is None or self._proc.returncode is not None:
            self.start()
        if self._starting is not None and not self._starting.done():
            await asyncio.shield(self._starting)
        if self._starting is not None and self._starting.done():
            error = self._starting.exception()
            self._starting = None
            if error is not None:
                raise error
        if self._proc is None or self._proc.returncode is not None:
            self._proc = None
            raise WorkerUnavailable("the /act worker exited right after starting")
        return self._proc

    async def _replace(self, proc: asyncio.subprocess.Process) -> None:
        """Kill a hung or dead worker and start its successor in the background."""
        _kill(proc)
        await proc.wait()
        self._proc = None
        self.start()

    async def _spawn(self) -> None:
        proc = await asyncio.create_subprocess_exec(
            self._python,
            "-m",
            "cua_guest.act_child",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            # Never the guest's own stderr (on a local desktop a pipe to the host's
            # launcher): what the agent's code writes to fd 1 or 2 goes nowhere.
            stderr=asyncio.subprocess.DEVNULL,
            limit=PIPE_LIMIT,
            # Own group: on timeout we kill whatever the code started too.
            start_new_session=True,
        )
        assert proc.stdout is not None
        try:
            line = await asyncio.wait_for(proc.stdout.readline(), STARTUP_TIMEOUT_S)
            hello = json.loads(line) if line else {"ready": False, "error": "exited at start"}
        except (TimeoutError, json.JSONDecodeError) as exc:
            hello = {"ready": False, "error": f"no readiness message ({exc!r})"}
        if not hello.get("ready"):
            _kill(proc)
            await proc.wait()
            raise WorkerUnavailable(f"the /act worker could not start: {hello.get('error')}")
        self._proc = proc
        log.info("act worker ready (pid %s)", proc.pid)


def _log_start_failure(task: asyncio.Task[None]) -> None:
    """Log a failed start once; the next /act reports it to the caller as a 503."""
    if not task.cancelled() and task.exception() is not None:
        log.warning("%s", task.exception())


def _kill(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL the worker's whole process group."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
