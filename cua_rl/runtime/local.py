"""Placing a run's components on one machine: the store, the policy and
reward-model servers, the desktop pool, the streaming judge.

`local_components` is an async context manager: whatever it started is stopped
on exit, in reverse order, also on error or cancellation (no stray desktops or
model servers after a run).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from cua_rl.config import RunConfig
from cua_rl.config.roles import run_roles
from cua_rl.desktop.file_cache import FileCache
from cua_rl.desktop.pool import DesktopPool
from cua_rl.desktop.providers.factory import make_provider
from cua_rl.inference.launcher import default_tiny_dir, replica_set
from cua_rl.inference.pool import InferencePool
from cua_rl.inference.replica_set import ReplicaSet
from cua_rl.reward.judge import StreamingJudge
from cua_rl.rollout.guest_desktop import PoolDesktops
from cua_rl.rollout.scheduler import ForecastSource, TaskSource
from cua_rl.runtime.devices import DeviceLayout, device_layout, node_gpus, replica_devices
from cua_rl.store.async_run_store import AsyncRunStore
from cua_rl.tasks.sources import DATA_ROOT, load_task_set
from cua_rl.types import TaskVariant


@dataclass
class Components:
    store: AsyncRunStore
    policy: InferencePool
    prm: InferencePool | None
    pool: DesktopPool
    desktops: PoolDesktops
    judge: StreamingJudge | None
    task_set: list[list[TaskVariant]]
    """Variants of every task in scope; the first of each is where a run starts."""


def host_cache_dir() -> Path:
    """The asset cache root: `$CUA_RL_CACHE_DIR`, else ~/.cache/cua-rl/files."""
    from cua_rl.desktop.file_cache import default_cache_root

    return default_cache_root()


def load_run_tasks(cfg: RunConfig) -> list[list[TaskVariant]]:
    """Every task of the run, checked before anything starts."""
    return load_task_set(
        cfg.tasks.source, cfg.tasks.split, cfg.tasks.ids, cfg.tasks.templates_root or DATA_ROOT
    )


@contextlib.asynccontextmanager
async def local_components(
    cfg: RunConfig,
    run_dir: Path,
    *,
    versions: dict[str, int] | None = None,
    layout: DeviceLayout | None = None,
) -> AsyncIterator[Components]:
    """Everything a run needs on this machine; `versions` are the weight versions the
    servers report at start (non-zero when a run resumes from a checkpoint); `layout`:
    each replica's devices (None: laid out here from the node's GPUs, refused when they
    do not fit; runtime/devices.py)."""
    versions = versions or {}
    layout = layout or device_layout(cfg, node_gpus(cfg), learners=False)
    task_set = load_run_tasks(cfg)
    store = AsyncRunStore.open(run_dir)
    await store.save_config(cfg.model_dump(mode="json"))
    for variants in task_set:
        for variant in variants:
            await store.add_variant(variant)
    tiny = cfg.tiny_model_dir or default_tiny_dir()
    logs = run_dir / "logs"
    async with contextlib.AsyncExitStack() as stack:
        stack.push_async_callback(store.close)
        # Both pools start at once: a replica spends most of its start-up loading
        # weights and waiting to be ready, so starting them in turn doubles the wait.
        roles = run_roles(cfg)
        names = ["policy", *(["prm"] if roles.prm_replicas else [])]
        sets = await _start_pools(stack, cfg, names, logs, tiny, versions, layout)
        policy = InferencePool(sets["policy"], cfg.policy.requests)
        stack.push_async_callback(policy.close)
        prm = judge = None
        if roles.prm_replicas:
            prm = InferencePool(sets["prm"], cfg.prm.requests)
            stack.push_async_callback(prm.close)
            judge = StreamingJudge(prm, store, cfg.judge)
            stack.push_async_callback(judge.close)
        provider = make_provider(cfg.desktops.provider, owner_pid=os.getpid())
        # spare desktops are started beside the actors' (fleet.spare_desktops)
        pool = DesktopPool(provider, cfg.desktops.count + cfg.fleet.spare_desktops)
        await pool.start()
        stack.push_async_callback(pool.close)
        desktops = PoolDesktops(
            pool,
            cache=FileCache(host_cache_dir()),
            work_root=run_dir / "work",
            cfg=cfg.episode,
            spares=cfg.fleet.spare_desktops,
            forks=cfg.fleet.fork_groups,
        )
        yield Components(store, policy, prm, pool, desktops, judge, task_set)


async def _start_pools(
    stack: contextlib.AsyncExitStack,
    cfg: RunConfig,
    names: list[str],
    logs: Path,
    tiny: Path,
    versions: dict[str, int],
    layout: DeviceLayout,
) -> dict[str, ReplicaSet]:
    """Start the named pools concurrently, each a supervised replica set with its own
    fresh credential and each replica on its devices; each one's stop joins `stack`,
    also when another fails to start (then the error propagates after all have settled)."""
    pools = {
        name: replica_set(
            getattr(cfg, name),
            name=name,
            log_dir=logs,
            tiny_dir=tiny,
            version=versions.get(name, 0),
            devices=replica_devices(layout, name, getattr(cfg, name).replicas),
        )
        for name in names
    }
    results = await asyncio.gather(
        *(stack.enter_async_context(cm) for cm in pools.values()), return_exceptions=True
    )
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return dict(zip(pools, results, strict=True))  # type: ignore[arg-type]  # exceptions were raised above; the rest are pools


def task_cycle(variants: Sequence[TaskVariant], max_groups: int | None) -> TaskSource:
    """Each variant once in order, or round-robin up to `max_groups` groups; it tells
    its next groups ahead (a `Forecast`, for spare desktops)."""
    order = list(variants)
    total = len(order) if max_groups is None else (max_groups if order else 0)
    given = 0

    async def next_variant() -> TaskVariant | None:
        nonlocal given
        if given >= total:
            return None
        given += 1
        return order[(given - 1) % len(order)]

    def upcoming(groups: int) -> list[TaskVariant]:
        return [order[k % len(order)] for k in range(given, min(total, given + groups))]

    return ForecastSource(next_variant, upcoming)
