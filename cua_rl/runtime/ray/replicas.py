"""One model-server replica on a Ray node, as a plain class (`ray.actors` wraps it).

On a cluster the policy and reward-model replicas belong on GPU nodes, not next
to the driver: each replica is an actor placed in a bundle of a placement group
(`ray.placement`), which starts the pool's server as a child process on its node
(`launcher.replica_launch`, as a local run does: every `vllm` option of the pool
applies), listening on all interfaces, and reports
`http://<node ip>:<port>` once `/health` answers. The driver then routes to
those URLs exactly as to local replicas (weight sync included), and supervises
them through `alive` and `restart` (`ray.replica_handle.RemoteReplica`).

Invariants: the child runs in its own process group and `stop` ends the whole
group (SIGTERM, then SIGKILL), so a stopped replica leaves no server behind; a
restart keeps the port (the reservation is held across it), so the URL the
driver routes to stays valid; restarts never overlap (one lock), so a driver
that gave up waiting on one and asks again does not start a second server; and
after `stop` nothing starts again.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from cua_rl.errors import InferenceUnavailable
from cua_rl.inference.launcher import (
    TINY,
    ModelServersConfig,
    ensure_tiny_model,
    replica_launch,
    resolve_model,
)
from cua_rl.inference.replica_process import ServerProcess, start_server
from cua_rl.inference.vllm_engine import resolve_vllm_python
from cua_rl.process_launch import ProcessLaunch

WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", ""})


def advertised_host(bind_host: str, node_ip: str) -> str:
    """Where clients reach a replica bound to `bind_host`: the node's IP when it listens
    on all interfaces, else that very address (a replica bound to 127.0.0.1, as on a
    one-machine cluster, is not reachable on the node's IP)."""
    return node_ip if bind_host in WILDCARD_HOSTS else bind_host


class ModelReplica:
    """Starts, reports and stops one `cua-rl serve` process on this node."""

    def __init__(
        self,
        servers: ModelServersConfig,
        *,
        name: str,
        log_dir: Path,
        tiny_dir: Path,
        version: int,
        bind_host: str,
        advertise_host: str,
        token: str | None = None,
    ) -> None:
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
        self.server: ServerProcess | None = None
        self.url: str | None = None
        self._restarting = asyncio.Lock()
        self._restart_task: asyncio.Task[object] | None = None
        self._stopped = False

    async def start(self) -> str:
        """Start the server and return its URL once it is healthy (on another port when
        the one picked was taken before the server bound it)."""
        if self.servers.model == TINY:
            await ensure_tiny_model(self.tiny_dir)  # built on this node if it is new
        model = resolve_model(self.servers, self.tiny_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 - once, at start-up

        python = resolve_vllm_python(self.servers.python) if self.servers.engine == "vllm" else None
        pool, _, index = self.name.rpartition("-")

        def launch(port: int) -> ProcessLaunch:
            # Ray set this actor's CUDA_VISIBLE_DEVICES (its bundle's GPUs): inherited
            return replica_launch(
                self.servers,
                name=pool or self.name,
                index=int(index) if index.isdigit() else 0,
                model=model,
                port=port,
                version=self.version,
                token=self.token,
                python=python,
                host=self.bind_host,
            )

        self.server = await start_server(
            launch,
            log_path=self.log_dir / f"{self.name}.log",
            ready_timeout_s=self.servers.ready_timeout_s,
            what=f"start of {self.name}",
            bind_host=self.bind_host,
            url_host=self.advertise_host,
        )
        self.url = self.server.url
        return self.url

    async def alive(self) -> bool:
        """Whether the server process runs (not whether it answers: that is /health's)."""
        return self.server is not None and self.server.alive()

    async def restart(self) -> str:
        """Stop what is left of the server, start it again on the same port and return
        its URL once healthy (raises if it is not); starts it when it never started."""
        async with self._restarting:
            if self._stopped:
                raise InferenceUnavailable(f"replica {self.name} is stopped")
            self._restart_task = asyncio.current_task()
            try:
                if self.server is None:
                    return await self.start()
                await self.server.restart()
                return self.server.url
            finally:
                self._restart_task = None

    async def stop(self) -> None:
        """Stop the server for good. A restart in progress is cancelled first (which
        leaves no process behind) and none starts afterwards: the driver stops replicas
        after it stopped supervising them, but a restart it gave up waiting on may still
        be running here."""
        self._stopped = True
        task = self._restart_task
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            await asyncio.wait([task])
        if self.server is not None:
            await self.server.close()
