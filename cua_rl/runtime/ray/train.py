"""`runtime: ray`: the training loop of `train.py` with its fleet spread over a
Ray cluster.

Who runs where:
- driver (this process): the learner engines and services (a learner with
  `ranks` > 1: its DeepSpeed ranks are actors in one placement group, ray/ranks.py), weight sync,
  checkpoints, the template selector, group samples and metrics (the shared
  `train` loop), the run store's configuration and task variants, and the
  model replicas when `ray.inference: driver` (as in a local run);
- `ray.fleet_workers` FleetWorker actors, spread over nodes: desktops, episodes,
  streaming judge, trajectory/verdict writes to the run store;
- one SchedulerService and one GateService actor on the driver's node: the run's
  task groups and staleness gate, shared by all workers;
- with `ray.inference: ray`, one ReplicaActor per model replica, placed in
  bundles (GPU nodes for vllm) and reporting its URL; the driver's `ReplicaSet`
  supervises it through a `RemoteReplica` (restarts its server when it dies).

What crosses processes: the config and URLs (once per worker), tickets,
trajectories and verdicts (worker -> scheduler), finished groups with running
counts (worker -> scheduler outbox -> driver), variants (driver -> scheduler),
versions (driver <-> gate <-> workers). Screenshots and rows go to the run
directory, which on several nodes must be a shared filesystem (and the config's
paths must be absolute and valid on every node); weight sync in `collective`
mode needs `train.sync.host` set to an address replicas can reach.

A fleet worker that is lost (its node died) does not end the run: its rollouts
in flight are re-queued, the run goes on with the workers left and a replacement
starts in its bundle once a node with room is there (ray/fleet.py); each loss and
replacement is a `worker_lost` / `worker_replaced` event and counter in the store.

Shutdown, also on error: workers stop their desktops (then are killed), the
services and replica actors are killed after their servers stop, placement
groups are removed, and Ray is shut down if this run started it.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import signal
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cua_rl.config import RunConfig
from cua_rl.errors import ConfigError
from cua_rl.inference.config import ModelServersConfig
from cua_rl.inference.launcher import default_tiny_dir, replica_set, supervised
from cua_rl.inference.pool import InferencePool
from cua_rl.inference.replica_set import ReplicaSet
from cua_rl.rollout.fleet import GroupHandler
from cua_rl.rollout.scheduler import TaskSource
from cua_rl.runtime.learner_start import start_engines
from cua_rl.runtime.local import load_run_tasks
from cua_rl.runtime.ray import placement as placement
from cua_rl.runtime.ray.fleet import WorkerFleet, WorkerSupervision
from cua_rl.runtime.ray.ranks import ray_rank_group
from cua_rl.runtime.ray.replica_handle import STOP_GRACE_S, RemoteReplica
from cua_rl.runtime.ray.routing import publishing_withheld
from cua_rl.runtime.ray.services import RemoteGate
from cua_rl.runtime.ray.workers import WorkerSpec
from cua_rl.runtime.task_budgets import TaskBudgets
from cua_rl.runtime.train import train
from cua_rl.store.async_run_store import AsyncRunStore
from cua_rl.types import TaskVariant


async def run_training_ray(
    cfg: RunConfig, run_dir: Path, *, resume: bool = False
) -> dict[str, Any]:
    import ray

    from cua_rl.runtime.ray.dry_run import ray_gpu_problems

    if problems := ray_gpu_problems(cfg):  # before a cluster is asked for anything
        raise ConfigError("; ".join(problems))
    run_dir = run_dir.absolute()  # noqa: ASYNC240 - workers do not share our cwd
    started = not ray.is_initialized()  # else the caller's Ray, left running at the end
    if started:
        local = (
            {"num_cpus": cfg.ray.init_num_cpus, "include_dashboard": cfg.ray.include_dashboard}
            if cfg.ray.address is None
            else {}
        )
        with sigterm_kept():
            ray.init(address=cfg.ray.address, **local)
    try:
        fleets: list[WorkerFleet] = []
        async with start_engines(cfg, run_dir, resume, transport=ray_rank_group(cfg.ray)) as (
            engines,
            served,
        ):
            versions = {role: engine.version for role, engine in engines.items()}
            async with ray_components(cfg, served, run_dir, versions) as parts:

                async def on_event(kind: str, data: dict[str, Any]) -> None:
                    await parts.store.add_event(kind, str(data["worker"]), data)
                    if kind in ("worker_lost", "worker_replaced"):
                        await parts.store.incr(kind.replace("worker_", "workers_"))

                budgets = TaskBudgets.for_run(cfg)  # the router fills it, the feed asks it

                def make_fleet(source: TaskSource, on_group: GroupHandler) -> WorkerFleet:
                    supervision = WorkerSupervision(
                        spawn=parts.workers.spawn,
                        kill=ray.kill,
                        max_replacements=cfg.ray.worker_replacements,
                        replace_timeout_s=cfg.ray.replace_timeout_s,
                        call_timeout_s=cfg.ray.stop_timeout_s,
                        on_event=on_event,
                    )
                    fleets.append(
                        WorkerFleet(
                            parts.scheduler,
                            list(parts.workers.handles),
                            source,
                            on_group,
                            supervision,
                            budget=budgets.budget if cfg.train.budgets.enabled else None,
                        )
                    )
                    return fleets[-1]

                def start_pool(
                    servers: ModelServersConfig, name: str
                ) -> contextlib.AbstractAsyncContextManager[ReplicaSet]:
                    return replicas(cfg, servers, name, run_dir, 0)

                withheld = {"policy": parts.policy.replicas}
                if parts.prm is not None:
                    withheld["prm"] = parts.prm.replicas
                async with publishing_withheld(parts.gate, withheld):
                    summary = await train(
                        cfg,
                        run_dir,
                        store=parts.store,
                        policy=parts.policy,
                        prm=parts.prm,
                        task_set=parts.task_set,
                        engines=engines,
                        gate=RemoteGate(parts.gate, cfg.fleet.eta),
                        rollouts=make_fleet,
                        resume=resume,
                        budgets=budgets,
                        start_pool=start_pool,
                    )
        summary["episodes_per_worker"] = fleets[0].episodes_per_worker()
        summary["workers_lost"] = len(fleets[0].lost)
        summary["workers_replaced"] = len(fleets[0].replaced)
        return summary
    finally:
        if started:
            ray.shutdown()


@contextlib.contextmanager
def sigterm_kept() -> Iterator[None]:
    """Keep this process's SIGTERM handling across `ray.init`, which replaces it (with
    `sys.exit`, and Ray's core worker with a handler that aborts the process): a
    SIGTERMed run must unwind like Ctrl-C (`stoppable.run_stoppable`) and stop what it
    started, leaving a store `--resume` continues, not die by SIGABRT."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers belong to the main thread; ray.init sets none here
        return
    previous = signal.getsignal(signal.SIGTERM)
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


@dataclass
class RayParts:
    store: AsyncRunStore
    policy: InferencePool
    prm: InferencePool | None
    task_set: list[list[TaskVariant]]
    scheduler: Any
    gate: Any
    workers: FleetWorkers
    """Actor handles; the workers start their fleets when `run` is called."""


@contextlib.asynccontextmanager
async def ray_components(
    cfg: RunConfig, served: RunConfig, run_dir: Path, versions: dict[str, int]
) -> AsyncIterator[RayParts]:
    """The driver's store and model pools plus the run's actors; everything is
    stopped in reverse order on exit (workers first, the store last)."""
    import ray

    from cua_rl.runtime.ray.actors import GateActor, SchedulerActor

    task_set = load_run_tasks(served)
    store = AsyncRunStore.open(run_dir)
    await store.save_config(served.model_dump(mode="json"))
    for variants in task_set:
        for variant in variants:
            await store.add_variant(variant)
    async with contextlib.AsyncExitStack() as stack:
        stack.push_async_callback(store.close)
        policy_set = await stack.enter_async_context(
            replicas(served, served.policy, "policy", run_dir, versions.get("policy", 0))
        )
        policy = InferencePool(policy_set, cfg.policy.requests)
        policy_urls = policy_set.urls
        prm, prm_urls = None, []
        if served.judge.enabled:
            prm_set = await stack.enter_async_context(
                replicas(served, served.prm, "prm", run_dir, versions.get("prm", 0))
            )
            prm = InferencePool(prm_set, cfg.prm.requests)
            prm_urls = prm_set.urls
        options = placement.service_options(
            cfg.ray.worker_actors(cfg.fleet.actors) * cfg.ray.fleet_workers, placement.driver_node()
        )
        scheduler = SchedulerActor.options(**options).remote(
            cfg.fleet.group_size, max_groups=cfg.fleet.max_groups, backlog=cfg.ray.group_backlog
        )
        stack.callback(ray.kill, scheduler)
        gate = GateActor.options(**options).remote(cfg.fleet.eta)
        stack.callback(ray.kill, gate)
        workers = await stack.enter_async_context(
            fleet_workers(served, run_dir, policy_urls, prm_urls, scheduler, gate)
        )
        yield RayParts(store, policy, prm, task_set, scheduler, gate, workers)


@contextlib.asynccontextmanager
async def replicas(
    cfg: RunConfig, servers: ModelServersConfig, name: str, run_dir: Path, version: int
) -> AsyncIterator[ReplicaSet]:
    """One role's model servers: given URLs, the driver's supervised hf replicas, or
    replica actors placed on the cluster (`ray.inference: ray`), which the driver
    supervises like local ones: a server that dies or stops answering is restarted
    through its actor on the same URL and caught up to the current weights before it
    serves (`RemoteReplica`). Each pool has its own credential."""
    tiny = cfg.tiny_model_dir or default_tiny_dir()
    if servers.urls or cfg.ray.inference == "driver":
        async with replica_set(
            servers, name=name, log_dir=run_dir / "logs", tiny_dir=tiny, version=version
        ) as started:
            yield started
        return
    token = secrets.token_urlsafe(32)
    from cua_rl.runtime.ray.actors import ReplicaActor

    bundles = placement.replica_bundles(cfg.ray, servers)
    group = await placement.reserve(
        bundles, "SPREAD", what=f"{name} replicas", timeout_s=cfg.ray.placement_timeout_s
    )
    handles: list[Any] = []
    remotes: list[RemoteReplica] = []
    try:
        for i, bundle in enumerate(bundles):
            handles.append(
                ReplicaActor.options(**placement.bundle_options(group, i, bundle)).remote(
                    servers,
                    name=f"{name}-{i}",
                    log_dir=run_dir / "logs",
                    tiny_dir=tiny,
                    version=version,
                    bind_host=cfg.ray.replica_bind_host,
                    token=token,
                )
            )
        urls = list(await asyncio.gather(*(h.start.remote() for h in handles)))
        remotes = [
            RemoteReplica(h, url, restart_timeout_s=servers.ready_timeout_s + STOP_GRACE_S)
            for h, url in zip(handles, urls, strict=True)
        ]
        async with supervised(
            servers, [(r.url, r) for r in remotes], name=name, token=token, version=version
        ) as remote:
            yield remote
    finally:
        await asyncio.gather(*(r.close() for r in remotes))
        await stop_actors(handles, cfg.ray.stop_timeout_s)
        placement.release(group)


@dataclass
class FleetWorkers:
    """The fleet workers' actors and how to start one more in a bundle (a
    replacement for a lost worker); every handle ever started is stopped at the end."""

    handles: list[Any]
    make: Any
    """(bundle index, worker id) -> a new actor handle."""

    def spawn(self, index: int, worker_id: str) -> Any:
        handle = self.make(index, worker_id)
        self.handles.append(handle)
        return handle


@contextlib.asynccontextmanager
async def fleet_workers(
    cfg: RunConfig,
    run_dir: Path,
    policy_urls: list[str],
    prm_urls: list[str],
    scheduler: Any,
    gate: Any,
) -> AsyncIterator[FleetWorkers]:
    """`ray.fleet_workers` worker actors, one per bundle of a SPREAD group."""
    from cua_rl.runtime.ray.actors import FleetWorkerActor

    bundles = placement.worker_bundles(cfg.ray)
    group = await placement.reserve(
        bundles, "SPREAD", what="fleet workers", timeout_s=cfg.ray.placement_timeout_s
    )

    def make(index: int, worker_id: str) -> Any:
        spec = WorkerSpec(
            worker_id,
            cfg,
            run_dir,
            policy_urls,
            prm_urls,
            actors=cfg.ray.worker_actors(cfg.fleet.actors),
            desktops=cfg.ray.worker_desktops(cfg.desktops.count),
        )
        return FleetWorkerActor.options(
            **placement.bundle_options(group, index, bundles[index])
        ).remote(spec, scheduler, gate)

    workers = FleetWorkers([], make)
    try:
        for i in range(len(bundles)):
            workers.spawn(i, f"w{i}")
        yield workers
    finally:
        await stop_actors(workers.handles, cfg.ray.stop_timeout_s)
        placement.release(group)


async def stop_actors(handles: list[Any], timeout_s: float) -> None:
    """Let each actor stop what it started, then kill it (also if it hangs)."""
    import ray

    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(
            asyncio.gather(*(h.stop.remote() for h in handles), return_exceptions=True), timeout_s
        )
    for handle in handles:
        ray.kill(handle)
