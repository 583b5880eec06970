"""One model-server replica on a Ray node, as a plain class (`ray_actors` wraps it).

On a cluster the policy and reward-model replicas belong on GPU nodes, not next
to the driver: each replica is an actor placed in a bundle of a placement group
(`ray_placement`), which starts `cua-rl serve --engine hf|vllm` as a child
process on its node, listening on all interfaces, and reports
`http://<node ip>:<port>` once `/health` answers. The driver then routes to
those URLs exactly as to local replicas (weight sync included).

Invariant: the child runs in its own process group and `stop` ends the whole
group (SIGTERM, then SIGKILL), so a stopped replica leaves no server behind.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from cua_rl.errors import InferenceUnavailable
from cua_rl.inference.client import InferenceClient
from cua_rl.inference.launcher import (
    TINY,
    ModelServersConfig,
    ensure_tiny_model,
    free_port,
    resolve_model,
)
from cua_rl.inference.owner_watch import owner_env
from cua_rl.inference.replica_process import stop_process
from cua_rl.inference.server_auth import TOKEN_ENV


class ModelReplica:
    """Starts, reports and stops one `cua-rl serve` process on this node."""

    def __init__(self, servers: ModelServersConfig, *, name: str, log_dir: Path,
                 tiny_dir: Path, version: int, bind_host: str, advertise_host: str,
                 token: str | None = None) -> None:
        """`token`: the pool's credential for `/update_weights` (in the server's
        environment, never argv)."""
        self.servers = servers
        self.name = name
        self.log_dir = log_dir
        self.tiny_dir = tiny_dir
        self.version = version
        self.bind_host = bind_host
        self.advertise_host = advertise_host
        self.token = token
        self.proc: asyncio.subprocess.Process | None = None
        self.url: str | None = None

    async def start(self) -> str:
        """Start the server and return its URL once it is healthy."""
        if self.servers.model == TINY:
            await ensure_tiny_model(self.tiny_dir)  # built on this node if it is new
        model = resolve_model(self.servers, self.tiny_dir)
        port = free_port(self.bind_host if self.bind_host != "0.0.0.0" else "")
        self.log_dir.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 - once, at start-up
        log_path = self.log_dir / f"{self.name}.log"
        argv = [sys.executable, "-m", "cua_rl.cli", "serve", "--engine", self.servers.engine,
                "--model", model, "--host", self.bind_host, "--port", str(port),
                "--version", str(self.version)]
        if self.servers.engine == "hf":
            argv += ["--threads", str(self.servers.threads)]
        env = {**os.environ, "OMP_NUM_THREADS": str(self.servers.threads),
               "TOKENIZERS_PARALLELISM": "false", **owner_env(),
               **({TOKEN_ENV: self.token} if self.token else {})}
        with open(log_path, "ab") as log:  # noqa: ASYNC230 - once; the child keeps the fd
            self.proc = await asyncio.create_subprocess_exec(
                *argv, stdout=log, stderr=asyncio.subprocess.STDOUT, env=env,
                start_new_session=True)
        self.url = f"http://{self.advertise_host}:{port}"
        await self._wait_healthy(log_path)
        return self.url

    async def _wait_healthy(self, log_path: Path) -> None:
        assert self.proc is not None and self.url is not None
        client = InferenceClient(self.url, timeout_s=5.0)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.servers.ready_timeout_s
        try:
            while not await client.health(timeout_s=2.0):
                if self.proc.returncode is not None:
                    tail = log_path.read_text(errors="replace")[-2000:]  # noqa: ASYNC240
                    raise InferenceUnavailable(
                        f"{self.name} at {self.url} exited ({self.proc.returncode}):\n{tail}")
                if loop.time() > deadline:
                    raise InferenceUnavailable(
                        f"{self.name} at {self.url} not healthy after "
                        f"{self.servers.ready_timeout_s} s (log: {log_path})")
                await asyncio.sleep(0.2)  # poll interval, not a readiness guess
        finally:
            await client.close()

    async def stop(self) -> None:
        if self.proc is not None:
            await stop_process(self.proc)
