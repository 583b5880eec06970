"""One model-server replica as a child process that can be stopped and started again.

The handle a `ReplicaSet` restarts (replica_set.py). The server runs in its own
process group, so stopping it (SIGTERM, then SIGKILL) never leaves a vLLM
engine-core child behind; it logs to one file across restarts; it restarts on the
same port, so its URL, sticky routing and client stay valid. Its environment
carries the run's model-server credential (never argv, which any local user can
read in the process table).

Ports: the handle holds its port's `PortReservation` (net_ports.py) for its whole
life, so while the server is down for a restart no other picker, and no outgoing
connection, can take the number. Only a program binding that exact port itself can;
then the restart fails with "address already in use" (an `InferenceUnavailable` raised
from `PortInUse`, naming the port), the supervisor retries it with backoff and, once
its restart budget is spent, marks the replica FAILED with that reason: the replica
cannot move, since its URL is its identity in routing. A first start has no URL yet,
so `start_server` simply starts again on a fresh port.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable
from pathlib import Path

from cua_rl.errors import InferenceUnavailable, PortInUse
from cua_rl.inference.client import InferenceClient
from cua_rl.inference.replica_log import LOG_BYTES, ROTATE_EVERY_S, rotate_replica_log
from cua_rl.net_ports import PortReservation, address_in_use, on_free_port
from cua_rl.process_launch import ProcessLaunch, record_launch


class ServerProcess:
    """Start, watch, restart and stop one `cua-rl serve` / vLLM process."""

    def __init__(
        self,
        argv: list[str],
        env: dict[str, str],
        url: str,
        log_path: Path,
        ready_timeout_s: float,
        port: PortReservation | None = None,
        log_max_bytes: int = LOG_BYTES,
    ) -> None:
        """`port`: the reservation of the port in `argv`, held until `close`;
        `log_max_bytes`: the log's size cap (inference/replica_log.py)."""
        self.argv = argv
        self.env = env
        self.url = url
        self.log_path = log_path
        self.ready_timeout_s = ready_timeout_s
        self.port = port
        self.proc: asyncio.subprocess.Process | None = None
        self._log_start = 0
        """Where this start's output begins in the log (shared by all starts)."""
        self.log_max_bytes = log_max_bytes
        self._rotating: asyncio.Task[None] | None = None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    async def spawn(self) -> None:
        """Start the process (not waiting for it to be ready)."""
        await asyncio.to_thread(self._check_log)  # may copy a log of 32 MB: not in the loop
        # Opened once per start; the child keeps the descriptor (O_APPEND: see
        # replica_log.py for why the log is rotated by copy and truncate).
        with open(self.log_path, "ab") as log:  # noqa: ASYNC230 - a local file, once
            self._log_start = log.tell()
            self.proc = await asyncio.create_subprocess_exec(
                *self.argv,
                stdout=log,
                stderr=asyncio.subprocess.STDOUT,
                env=self.env,
                start_new_session=True,
            )
        if self._rotating is None or self._rotating.done():
            self._rotating = asyncio.create_task(self._rotate_while_running())

    def _check_log(self) -> None:
        if rotate_replica_log(self.log_path, self.log_max_bytes):
            self._log_start = 0  # this start's output now begins at the top

    async def _rotate_while_running(self) -> None:
        while self.alive():
            await asyncio.sleep(ROTATE_EVERY_S)
            try:
                await asyncio.to_thread(self._check_log)
            except OSError:  # a log we cannot rotate is no reason to touch the server
                continue

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
                    self._raise_exited()
                if loop.time() > end:
                    raise InferenceUnavailable(
                        f"model server {self.url} not healthy after "
                        f"{self.ready_timeout_s:g} s ({self.log_path})"
                    )
                await asyncio.sleep(0.2)  # poll interval, not a readiness guess
        finally:
            await client.close()

    def _raise_exited(self) -> None:
        assert self.proc is not None
        with open(self.log_path, "rb") as log:
            log.seek(self._log_start)
            output = log.read().decode(errors="replace")
        tail = output[-2000:]
        if address_in_use(output) and self.port is not None:
            taken = PortInUse(
                self.port.host,
                self.port.port,
                f"model server {self.url} exited ({self.proc.returncode}) "
                "because it could not bind it",
            )
            raise InferenceUnavailable(f"{taken} (log: {self.log_path})") from taken
        raise InferenceUnavailable(
            f"model server {self.url} exited ({self.proc.returncode}):\n{tail}"
        )

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
        if self._rotating is not None:
            self._rotating.cancel()
            self._rotating = None
        if self.proc is not None:
            await stop_process(self.proc)

    async def close(self) -> None:
        """Stop the process for good and let its port go."""
        await self.stop()
        if self.port is not None:
            self.port.release()


async def start_server(
    launch: Callable[[int], ProcessLaunch],
    *,
    log_path: Path,
    ready_timeout_s: float,
    what: str,
    bind_host: str = "127.0.0.1",
    url_host: str = "127.0.0.1",
    log_max_bytes: int = LOG_BYTES,
) -> ServerProcess:
    """Start `launch(port)` (its argv, with its env over this process's) on a reserved
    port and return it once healthy; a port taken before the server bound it costs a
    start on another port (net_ports.on_free_port). `url_host` is where clients reach
    it (a node's address when it binds 0.0.0.0). Every start is recorded
    (process_launch.record_launch)."""

    async def start(port: PortReservation) -> ServerProcess:
        spec = launch(port.port)
        record_launch(spec)
        handle = ServerProcess(
            list(spec.argv),
            {**os.environ, **spec.env},
            f"http://{url_host}:{port.port}",
            log_path,
            ready_timeout_s,
            port=port,
            log_max_bytes=log_max_bytes,
        )
        try:
            await handle.spawn()
            await handle.wait_healthy()
        except BaseException:
            await handle.stop()
            raise
        return handle

    return await on_free_port(start, what, host=bind_host)


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
