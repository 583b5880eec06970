"""One fleet worker of a Ray run, as a plain class (`ray.actors` wraps it).

A worker owns everything that must sit next to its desktops: a `DesktopPool` of
desktops on its node, the policy and reward-model pools (by URL), its own
`StreamingJudge`, and the run store opened on the run directory (SQLite WAL and
screenshot files: several processes may write at once, so on several nodes the
run directory must be on a shared filesystem). It runs an unchanged `Fleet`
whose scheduler and gate are the run's services (`RemoteScheduler`,
`RemoteGate`); finished groups go to the driver through the scheduler's outbox.

Invariants: whatever the worker started is stopped when `run` returns, raises
or is cancelled (`stop`); every group this worker's fleet emits is in the
outbox before `run` returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cua_rl import spans
from cua_rl.config import RunConfig
from cua_rl.desktop.file_cache import FileCache
from cua_rl.desktop.pool import DesktopPool
from cua_rl.desktop.providers.factory import make_provider
from cua_rl.inference.base import ChatBackend
from cua_rl.inference.pool import InferencePool
from cua_rl.inference.replica_set import ReplicaSet
from cua_rl.reward.judge import StreamingJudge
from cua_rl.rollout.fleet import DesktopSource, Fleet
from cua_rl.rollout.guest_desktop import PoolDesktops
from cua_rl.runtime.local import host_cache_dir
from cua_rl.runtime.ray.routing import following_withheld
from cua_rl.runtime.ray.services import GroupReport, RemoteGate, RemoteScheduler
from cua_rl.store.async_run_store import AsyncRunStore
from cua_rl.types import GroupRecord


@dataclass(frozen=True)
class WorkerSpec:
    """What the driver sends a worker (pickled once, at start)."""

    worker_id: str
    cfg: RunConfig
    run_dir: Path
    policy_urls: list[str]
    prm_urls: list[str]
    """Empty when the reward model is off (`judge.enabled: false`)."""
    actors: int
    desktops: int


@dataclass(frozen=True)
class WorkerReport:
    """What a worker returns when its fleet has drained."""

    worker_id: str
    counts: dict[str, float]
    busy_s: float


@dataclass
class WorkerParts:
    store: AsyncRunStore
    policy: InferencePool
    judge: StreamingJudge | None
    desktops: PoolDesktops


class FleetWorker:
    """Runs one `Fleet` against the run's scheduler and gate services."""

    def __init__(self, spec: WorkerSpec, scheduler: Any, gate: Any) -> None:
        self.spec = spec
        self.scheduler = RemoteScheduler(scheduler, spec.worker_id)
        self.gate = RemoteGate(gate, spec.cfg.fleet.eta)
        self.fleet: Fleet | None = None
        self._running: asyncio.Task[Any] | None = None
        self._done = asyncio.Event()

    async def ready(self) -> str:
        """Answers once the actor exists (placed on a node): the driver's sign that a
        replacement worker has started."""
        return self.spec.worker_id

    async def run(self) -> WorkerReport:
        """Start this worker's desktops and pools, run the fleet until the
        scheduler is drained, stop everything."""
        self._running = asyncio.current_task()
        try:
            async with worker_parts(self.spec, self.spec.cfg.episode) as parts:
                judged = parts.judge.prm if parts.judge is not None else None
                pools = {
                    name: pool.replicas
                    for name, pool in (("policy", parts.policy), ("prm", judged))
                    if isinstance(getattr(pool, "replicas", None), ReplicaSet)
                }
                # staggered sync: route around the replicas the driver is updating
                async with following_withheld(
                    self.gate.handle, pools, parts.store, self.spec.worker_id
                ):
                    return await self.run_fleet(
                        parts.desktops, parts.policy, parts.store, judge=parts.judge
                    )
        finally:
            self._done.set()

    async def run_fleet(
        self,
        desktops: DesktopSource,
        policy: ChatBackend,
        store: AsyncRunStore,
        *,
        judge: StreamingJudge | None = None,
    ) -> WorkerReport:
        """The fleet on given parts (tests give it fakes)."""
        self.fleet = Fleet(
            self.scheduler,  # type: ignore[arg-type]  # tests give the fleet duck-typed parts
            desktops,
            policy,
            store,
            self.spec.cfg.episode,
            self.spec.cfg.fleet,
            judge=judge,
            gate=self.gate,
            on_group=self._on_group,
            horizon=self.spec.cfg.train.horizon,
            actors=self.spec.actors,
            seed=self.spec.cfg.seed,
        )
        counts = await self.fleet.run()
        await store.incr(f"episodes/{self.spec.worker_id}", counts["episodes"])
        return WorkerReport(self.spec.worker_id, dict(counts), self.fleet.busy_s)

    async def _on_group(self, finished: GroupRecord) -> None:
        assert self.fleet is not None
        await self.scheduler.put_group(
            GroupReport(self.spec.worker_id, finished, dict(self.fleet.counts), self.fleet.busy_s)
        )

    async def stop(self) -> None:
        """Cancel a running `run` and wait until it has stopped its desktops."""
        if self._running is not None and not self._done.is_set():
            self._running.cancel()
            await self._done.wait()


@contextlib.asynccontextmanager
async def worker_parts(spec: WorkerSpec, episode: Any) -> AsyncIterator[WorkerParts]:
    """The store, pools, judge and desktops of one worker; stopped in reverse
    order on exit, also on error or cancellation."""
    cfg = spec.cfg
    async with contextlib.AsyncExitStack() as stack:
        stack.enter_context(spans.recording(spec.run_dir if cfg.metrics.spans else None))
        store = AsyncRunStore.open(spec.run_dir)
        stack.push_async_callback(store.close)
        policy = InferencePool(spec.policy_urls, cfg.policy.requests)
        policy.replicas.name = "policy"  # logs and spans name the pool
        stack.push_async_callback(policy.close)
        judge = None
        if cfg.judge.enabled and spec.prm_urls:
            prm = InferencePool(spec.prm_urls, cfg.prm.requests)
            prm.replicas.name = "prm"
            stack.push_async_callback(prm.close)
            judge = StreamingJudge(prm, store, cfg.judge)
            stack.push_async_callback(judge.close)
        provider = make_provider(cfg.desktops.provider, owner_pid=os.getpid())
        pool = DesktopPool(
            provider, spec.desktops, id_prefix=f"{spec.worker_id}-{secrets.token_hex(3)}"
        )
        await pool.start()
        stack.push_async_callback(pool.close)
        desktops = PoolDesktops(
            pool,
            cache=FileCache(host_cache_dir()),
            work_root=spec.run_dir / "work" / spec.worker_id,
            cfg=episode,
        )
        yield WorkerParts(store, policy, judge, desktops)
