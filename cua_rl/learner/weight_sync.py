"""Weight sync: from a learner to every replica of its inference pool.

Replicas are updated one at a time, so the pool never stops serving: while one
replica swaps weights the others keep answering, and each replica itself keeps
serving its old weights until the new ones are complete (the server swaps under
its generation gate). Two transports: `checkpoint` exports an HF directory once
and has each replica load it; `collective` broadcasts the tensors over a
two-party gloo link per replica (NCCL in the vLLM worker extension on GPU).
After a sync, every replica reports the new version in `x-model-version`.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from cua_rl.inference.client import InferenceClient
from cua_rl.inference.launcher import free_port
from cua_rl.learner.config import WeightSyncConfig


class WeightSource(Protocol):
    """What a learner engine offers for a sync (TrainEngine has this shape)."""

    def named_parameters(self) -> Iterator[tuple[str, Any]]: ...

    def export_weights(self, path: str | Path) -> Path: ...


class WeightSync:
    def __init__(self, urls: list[str], cfg: WeightSyncConfig, export_root: Path) -> None:
        self.clients = [InferenceClient(u, timeout_s=cfg.timeout_s) for u in urls]
        self.cfg = cfg
        self.export_root = export_root
        self._exports: list[Path] = []

    async def push(self, source: WeightSource, version: int) -> list[int]:
        """Send the source's weights as `version` to each replica in turn."""
        if self.cfg.mode == "checkpoint":
            path = await self._export(source, version)
            return [await c.update_weights(version, str(path), self.cfg.timeout_s)
                    for c in self.clients]
        return [await self._broadcast(c, source, version) for c in self.clients]

    async def _export(self, source: WeightSource, version: int) -> Path:
        path = self.export_root / f"v{version:06d}"
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, source.export_weights, path)
        self._exports.append(path)
        while len(self._exports) > self.cfg.keep_exports:
            old = self._exports.pop(0)
            await loop.run_in_executor(None, shutil.rmtree, old, True)
        return path

    async def _broadcast(self, client: InferenceClient, source: WeightSource,
                         version: int) -> int:
        from cua_rl.inference import weight_transfer as wt

        named = list(source.named_parameters())
        port = free_port(self.cfg.host)
        store = wt.host_store(self.cfg.host, port, self.cfg.timeout_s)
        request = asyncio.create_task(client.update_weights_collective(
            version, self.cfg.host, port, wt.manifest(named), self.cfg.timeout_s))
        loop = asyncio.get_running_loop()

        def send() -> None:
            group = wt.open_link(self.cfg.host, port, rank=0, timeout_s=self.cfg.timeout_s,
                                 store=store)
            wt.send(group, (p for _, p in named))

        sending = loop.run_in_executor(None, send)
        done, _ = await asyncio.wait({request, sending}, return_when=asyncio.FIRST_EXCEPTION)
        if request in done and request.exception() is not None:
            # The replica refused (e.g. a manifest mismatch): nobody will join the
            # link, so the sender thread ends at its connect timeout.
            raise request.exception()  # type: ignore[misc]
        await sending
        return await request

    async def close(self) -> None:
        for client in self.clients:
            await client.close()

