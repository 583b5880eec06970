"""One model-server replica as a child process that can be stopped and started again.

The handle a `ReplicaSet` restarts (replica_set.py). The server runs in its own
process group, so stopping it (SIGTERM, then SIGKILL) never leaves a vLLM
engine-core child behind; it logs to one file across restarts; it restarts on the
same port, so its URL, sticky routing and client stay valid. Its environment
carries the run's model-server credential (never argv, which any local user can
read in the process table).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

from cua_rl.errors import InferenceUnavailable
from cua_rl.inference.client import InferenceClient


class ServerProcess:
    """Start, watch, restart and stop one `cua-rl serve` / vLLM process."""

    def __init__(self, argv: list[str], env: dict[str, str], url: str, log_path: Path,
                 ready_timeout_s: float) -> None:
        self.argv = argv
        self.env = env
        self.url = url
        self.log_path = log_path
        self.ready_timeout_s = ready_timeout_s
        self.proc: asyncio.subprocess.Process | None = None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    async def spawn(self) -> None:
        """Start the process (not waiting for it to be ready)."""
        # Opened once per start; the child keeps the descriptor.
        with open(self.log_path, "ab") as log:  # noqa: ASYNC230 - a local file, once
            self.proc = await asyncio.create_subprocess_exec(
                *self.argv, stdout=log, stderr=asyncio.subprocess.STDOUT, env=self.env,
                start_new_session=True)

    async def wait_healthy(self) -> None:
        """Poll /health until it answers; raise if the process exits or the deadline
        (`ready_timeout_s`) passes."""
        assert self.proc is not None
        client = InferenceClient(self.url, timeout_s=5.0)
        loop = asyncio.get_running_loop()
        end = loop.time() + self.ready_timeout_s
        try:
            while not await client.health(timeout_s=2.0):
                if self.proc.returncode is not None:
                    tail = self.log_path.read_text(errors="replace")[-2000:]  # noqa: ASYNC240
                    raise InferenceUnavailable(
                        f"model server {self.url} exited ({self.proc.returncode}):\n{tail}")
                if loop.time() > end:
                    raise InferenceUnavailable(f"model server {self.url} not healthy after "
                                               f"{self.ready_timeout_s:g} s ({self.log_path})")
                await asyncio.sleep(0.2)  # poll interval, not a readiness guess
        finally:
            await client.close()

    async def restart(self) -> None:
        """Stop what is left, start again on the same port, return once healthy; a start
        that fails or is cancelled leaves no process behind."""
        await self.stop()
        await self.spawn()
        try:
            await self.wait_healthy()
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        if self.proc is not None:
            await stop_process(self.proc)


async def stop_process(proc: asyncio.subprocess.Process, grace_s: float = 5.0) -> None:
    """SIGTERM the process group, SIGKILL it after a grace period."""
    if proc.returncode is not None:
        with contextlib.suppress(ProcessLookupError):  # its group may outlive it
            os.killpg(proc.pid, signal.SIGKILL)
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            await asyncio.wait_for(proc.wait(), grace_s)
            return
        except TimeoutError:
            continue
