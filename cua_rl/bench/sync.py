"""`cua-rl bench sync` (cli/bench/sync.py): what a weight sync costs the requests that meet it.

Real hf replicas of the tiny model behind an `InferencePool`, a few clients sending
chat requests through it without pause, and a `WeightSync` pushing perturbed
weights a few times meanwhile. Every request is timed; a request counts as "routed
to a replica under update" when it started on a replica while that replica's
`/update_weights` call was running. The figure that matters is how much longer
those requests take than the others (docs/architecture.md, weight sync): with
`staggered` sync there should be none, since a replica under update is out of
routing.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cua_rl.inference.client import InferenceClient

MESSAGES = [{"role": "user", "content": "Describe the screen in one sentence."}]


@dataclass(frozen=True)
class Timed:
    url: str
    start: float
    end: float


class _TimedClient(InferenceClient):
    """A replica's client that notes when each of its weight updates ran."""

    def __init__(self, base: InferenceClient, windows: list[Timed]) -> None:
        super().__init__(
            base.base_url,
            base.timeout_s,
            connect_timeout_s=base.connect_timeout_s,
            token=base.token,
        )
        self._windows = windows

    async def update_weights_collective(self, *args: Any, **kwargs: Any) -> int:
        start = time.monotonic()
        try:
            return await super().update_weights_collective(*args, **kwargs)
        finally:
            self._windows.append(Timed(self.base_url, start, time.monotonic()))


class _Source:
    """The learner's weights: the tiny model, moved a little before every sync."""

    def __init__(self, model_dir: Path) -> None:
        import torch
        from transformers import AutoModelForImageTextToText

        self.torch = torch
        self.model = AutoModelForImageTextToText.from_pretrained(model_dir).eval()

    def perturb(self) -> None:
        with self.torch.no_grad():
            for p in self.model.parameters():
                p.add_(self.torch.randn_like(p) * 1e-3)

    def named_parameters(self) -> Any:
        return self.model.named_parameters()

    def export_weights(self, path: Path) -> Path:
        self.model.save_pretrained(str(path))
        return Path(path)


def summarize(requests: list[Timed], windows: list[Timed]) -> dict[str, Any]:
    """Latencies of requests that started on a replica under update vs. the rest."""

    def under_update(r: Timed) -> bool:
        return any(w.url == r.url and w.start <= r.start < w.end for w in windows)

    met = [r.end - r.start for r in requests if under_update(r)]
    rest = [r.end - r.start for r in requests if not under_update(r)]

    def ms(values: list[float], q: str) -> float | None:
        if not values:
            return None
        value = {"median": statistics.median, "max": max}[q](values)
        return round(1000 * value, 1)

    return {
        "requests": len(requests),
        "routed_to_updating": len(met),
        "updating_median_ms": ms(met, "median"),
        "updating_max_ms": ms(met, "max"),
        "other_median_ms": ms(rest, "median"),
        "other_max_ms": ms(rest, "max"),
        "update_median_ms": ms([w.end - w.start for w in windows], "median"),
    }


async def run_bench_sync(
    model_dir: Path,
    work: Path,
    *,
    replicas: int = 2,
    syncs: int = 3,
    clients: int = 4,
    staggered: bool = True,
) -> dict[str, Any]:
    """Serve, sync `syncs` times under load, and summarize (see module doc)."""
    from cua_rl.inference.config import ModelServersConfig
    from cua_rl.inference.launcher import replica_set
    from cua_rl.inference.pool import InferencePool
    from cua_rl.learner.config import WeightSyncConfig
    from cua_rl.learner.weight_sync import WeightSync

    loop = asyncio.get_running_loop()
    source = await loop.run_in_executor(None, _Source, model_dir)
    windows: list[Timed] = []
    requests: list[Timed] = []
    servers = ModelServersConfig(model=str(model_dir), threads=1, replicas=replicas)
    async with replica_set(servers, name="bench", log_dir=work / "logs") as replica_group:
        for replica in replica_group.replicas.values():
            replica.client = _TimedClient(replica.client, windows)
        pool = InferencePool(replica_group)
        sync = WeightSync(
            replica_group,
            WeightSyncConfig(mode="collective", staggered=staggered),
            work / "exports",
        )
        done = asyncio.Event()

        async def client(k: int) -> None:
            while not done.is_set():
                start = time.monotonic()
                result = await pool.chat(MESSAGES, max_tokens=8, temperature=1.0, seed=k)
                requests.append(Timed(result.url, start, time.monotonic()))

        began = time.monotonic()
        senders = [asyncio.create_task(client(k)) for k in range(clients)]
        try:
            for version in range(1, syncs + 1):
                while len(requests) < 4 * clients * version:  # load in steady state first
                    await asyncio.sleep(0.05)
                    if any(t.done() for t in senders):
                        break
                await loop.run_in_executor(None, source.perturb)
                await sync.push(source, version)
        finally:
            done.set()
            await asyncio.wait_for(asyncio.gather(*senders, return_exceptions=True), 300)
            wall = time.monotonic() - began
            await sync.close()
    for task in senders:
        if task.exception() is not None:
            raise task.exception()  # type: ignore[misc]  # checked not None on the line above
    return {
        "replicas": replicas,
        "syncs": syncs,
        "clients": clients,
        "staggered": staggered,
        "requests_per_s": round(len(requests) / wall, 2),
        **summarize(requests, windows),
    }


def measure(
    *, replicas: int = 2, syncs: int = 3, clients: int = 4, staggered: bool = True
) -> dict[str, Any]:
    """`run_bench_sync` on the cached format-primed tiny model (built when missing),
    in a temporary work folder."""
    import tempfile

    from cua_rl.inference.launcher import default_tiny_dir, ensure_tiny_model

    async def main() -> dict[str, Any]:
        model = await ensure_tiny_model(default_tiny_dir())
        with tempfile.TemporaryDirectory(prefix="cua-rl-bench-sync-") as work:
            return await run_bench_sync(
                model,
                Path(work),
                replicas=replicas,
                syncs=syncs,
                clients=clients,
                staggered=staggered,
            )

    return asyncio.run(main())
