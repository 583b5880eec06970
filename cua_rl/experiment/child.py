"""One `cua-rl` command of a cell, run in a child process with a deadline.

A child per command keeps every training segment, evaluation and export exactly
what a person typing it gets (and frees its memory when it ends). Its stderr goes
to a log file in the cell's folder, its `--json` result to a file that is read
back; while it runs, a heartbeat line says how long it has and what it last
logged. `interrupt` sends it SIGTERM (which stops a run so that `--resume`
continues it) and, if it has not ended within `STOP_GRACE_S`, SIGKILL.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from cua_rl.errors import RunFailed

STOP_GRACE_S = 120.0
"""How long a child may take to stop after SIGTERM before it is killed."""


def last_line(log: Path, limit: int = 160) -> str:
    """The last non-empty line of a log file (for progress and error lines)."""
    try:
        with log.open("rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 8192))
            lines = [ln for ln in f.read().decode(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1].strip()[:limit] if lines else ""


class ChildCommands:
    """Runs `python -m cua_rl.cli ARGS` one at a time; `interrupt` stops the one running."""

    def __init__(
        self,
        progress: Callable[[str], None],
        *,
        heartbeat_s: float = 60.0,
        python: str = sys.executable,
    ) -> None:
        self.progress = progress
        self.heartbeat_s = heartbeat_s
        self.python = python
        self._child: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._interrupted = False

    def interrupt(self) -> None:
        with self._lock:
            self._interrupted = True
            if self._child is not None and self._child.poll() is None:
                self._child.send_signal(signal.SIGTERM)

    def run(self, args: Sequence[str], log: Path, *, timeout_s: float) -> str:
        """Run one command to its end; its stdout. RunFailed when it exits non-zero
        (not because it was interrupted) or runs past `timeout_s`."""
        command = [self.python, "-m", "cua_rl.cli", *args]
        log.parent.mkdir(parents=True, exist_ok=True)
        shown = " ".join(["cua-rl", *args])
        with log.open("ab") as err, tempfile.TemporaryFile() as out:
            err.write(f"\n$ {shown}\n".encode())
            err.flush()
            with self._lock:
                if self._interrupted:
                    return ""
                child = self._child = subprocess.Popen(
                    command, stdout=out, stderr=err, stdin=subprocess.DEVNULL
                )
            started = time.monotonic()
            try:
                code, timed_out = self._wait(child, log, started, timeout_s)
            finally:
                with self._lock:
                    self._child = None
            out.seek(0)
            stdout = out.read().decode(errors="replace")
        if timed_out:
            raise RunFailed(
                f"`{shown}` ran past its {timeout_s:.0f} s deadline "
                f"(experiment step_timeout_s) and was stopped (log: {log})"
            )
        if self._interrupted:
            return stdout
        if code != 0:
            raise RunFailed(
                f"`{shown}` exited {code}: {last_line(log) or 'no output'} (log: {log})"
            )
        return stdout

    def _wait(
        self, child: subprocess.Popen[bytes], log: Path, started: float, timeout_s: float
    ) -> tuple[int, bool]:
        """The child's exit code, and whether it was stopped for its deadline."""
        stopping_since: float | None = None
        timed_out = False
        while True:
            try:
                wait = 5.0 if stopping_since is not None else self.heartbeat_s
                return child.wait(timeout=wait), timed_out
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            if stopping_since is None and now - started > timeout_s:
                timed_out = True
                child.send_signal(signal.SIGTERM)
                stopping_since = now
            elif stopping_since is None and self._interrupted:
                stopping_since = now  # interrupt() has sent SIGTERM
            elif stopping_since is not None and now - stopping_since > STOP_GRACE_S:
                child.kill()
                return child.wait(timeout=STOP_GRACE_S), timed_out
            if stopping_since is None:
                self.progress(f"  ... {int(now - started)} s: {last_line(log)}")
