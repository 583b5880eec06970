"""The main job: actors, the streaming reward model, both learners with weight
sync, and the template selector, on one machine.

Dataflow (docs/algorithms.md): the selector is the fleet's task source; each
finished task group goes to the selector (adaptation); a group of an original or
accepted task becomes policy and PRM samples, queued as one unit to the two
learners, which train on whole groups, checkpoint and push weights while the
actors keep sampling. Groups of candidate tasks (Algorithm 2's temporary q')
only decide acceptance and never reach a learner. The run ends once the policy learner
has made `train.max_policy_updates` updates: the task source dries up, the
fleet drains, the learners train what is queued, and everything stops.
Resuming restarts servers from the last checkpointed weights and versions, the
selector from its saved state; counters live in the run store.

The selector (its templates, rewriter and the rewriter's pool, critic and saved
state) is built in run_selector.py; this module runs the loop around it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from cua_rl import spans
from cua_rl.config import RunConfig
from cua_rl.inference.config import ModelServersConfig
from cua_rl.inference.launcher import default_tiny_dir, replica_set
from cua_rl.inference.pool import InferencePool
from cua_rl.inference.replica_set import ReplicaSet
from cua_rl.learner.base import TrainEngine
from cua_rl.learner.config import LearnerLoopConfig
from cua_rl.learner.service import LearnerService, Role
from cua_rl.learner.weight_sync import WeightSync
from cua_rl.process_launch import record_launch
from cua_rl.reward.samples import GroupSamples
from cua_rl.rollout.fleet import Fleet, GroupHandler
from cua_rl.rollout.scheduler import ForecastSource, GroupScheduler, TaskSource
from cua_rl.runtime.devices import (
    DeviceLayout,
    device_layout,
    driver_launch,
    node_gpus,
    pin_driver,
    replica_devices,
)
from cua_rl.runtime.group_router import GroupRouter
from cua_rl.runtime.learner_start import start_engines
from cua_rl.runtime.local import Components, local_components
from cua_rl.runtime.run_selector import PoolStarter, make_selector, rewriter_pool
from cua_rl.runtime.success_replay import SuccessReplay
from cua_rl.runtime.sync_batches import SyncBatches
from cua_rl.runtime.task_budgets import TaskBudgets
from cua_rl.runtime.telemetry.group_metrics import group_metrics
from cua_rl.runtime.telemetry.live import live_summary
from cua_rl.runtime.telemetry.metrics import MetricsLogger
from cua_rl.runtime.telemetry.progress import RunProgress
from cua_rl.staleness_gate import Gate, VersionGate
from cua_rl.store.async_run_store import AsyncRunStore
from cua_rl.store.upkeep import StoreUpkeep
from cua_rl.types import GroupRecord, TaskVariant

log = logging.getLogger(__name__)


async def run_training(cfg: RunConfig, run_dir: Path, *, resume: bool = False) -> dict[str, Any]:
    """A training run with every component on this machine (`runtime: local`);
    `runtime: ray` is `ray.train.run_training_ray`, which reuses `train` below."""
    layout = device_layout(cfg, node_gpus(cfg))  # refused here when the node is too small
    pin_driver(layout)  # before any CUDA in this process: its in-process learners' devices
    record_launch(driver_launch(layout))
    async with start_engines(cfg, run_dir, resume, layout=layout) as (engines, served):
        versions = {role: engine.version for role, engine in engines.items()}
        async with local_components(served, run_dir, versions=versions, layout=layout) as parts:
            return await _train(cfg, run_dir, parts, engines, resume, layout)


async def _train(
    cfg: RunConfig,
    run_dir: Path,
    parts: Components,
    engines: dict[str, TrainEngine],
    resume: bool,
    layout: DeviceLayout,
) -> dict[str, Any]:
    gate = VersionGate(cfg.fleet.eta)
    budgets = TaskBudgets.for_run(cfg)  # the router fills it, the scheduler asks it

    def make_fleet(source: TaskSource, on_group: GroupHandler) -> Fleet:
        scheduler = GroupScheduler(
            source,
            cfg.fleet.group_size,
            max_groups=cfg.fleet.max_groups,
            group_ids=lambda: f"g-{uuid.uuid4().hex[:12]}",
            budget=budgets.budget if cfg.train.budgets.enabled else None,
        )
        return Fleet(
            scheduler,
            parts.desktops,
            parts.policy,
            parts.store,
            cfg.episode,
            cfg.fleet,
            judge=parts.judge,
            gate=gate,
            on_group=on_group,
            horizon=cfg.train.horizon,
            seed=cfg.seed,
        )

    def start_pool(
        servers: ModelServersConfig, name: str
    ) -> contextlib.AbstractAsyncContextManager[ReplicaSet]:
        return replica_set(
            servers,
            name=name,
            log_dir=run_dir / "logs",
            tiny_dir=cfg.tiny_model_dir or default_tiny_dir(),
            devices=replica_devices(layout, name, servers.replicas),
        )

    return await train(
        cfg,
        run_dir,
        store=parts.store,
        policy=parts.policy,
        prm=parts.prm,
        task_set=parts.task_set,
        engines=engines,
        gate=gate,
        rollouts=make_fleet,
        resume=resume,
        budgets=budgets,
        start_pool=start_pool,
    )


class Rollouts(Protocol):
    """What the training loop needs of a fleet, wherever its actors run."""

    counts: Counter[str]
    busy_s: float

    async def run(self) -> Any: ...


RolloutsFactory = Callable[[TaskSource, GroupHandler], Rollouts]
"""Builds the fleet from the loop's task source and finished-group handler."""


async def train(
    cfg: RunConfig,
    run_dir: Path,
    *,
    store: AsyncRunStore,
    policy: InferencePool,
    prm: InferencePool | None,
    task_set: list[list[TaskVariant]],
    engines: dict[str, TrainEngine],
    gate: Gate,
    rollouts: RolloutsFactory,
    resume: bool,
    budgets: TaskBudgets | None = None,
    start_pool: PoolStarter,
) -> dict[str, Any]:
    """The training loop on the driver, whichever runtime places the fleet: the
    selector is the fleet's task source, finished groups become samples for the
    learners; `gate` is a `VersionGate` here or a `RemoteGate` to one under Ray.
    `budgets`: the per-task budgets the fleet's scheduler asks (`train.budgets`);
    `start_pool`: how the rewriter's pool is started (on this machine's devices, or
    as Ray replica actors)."""
    async with (
        rewriter_pool(cfg, start_pool) as rewriter_model,
        spans.recording(
            run_dir if cfg.metrics.spans else None, cfg.metrics.spans_max_mb * 1024 * 1024
        ),
    ):
        return await _train_loop(
            cfg,
            run_dir,
            store=store,
            policy=policy,
            prm=prm,
            task_set=task_set,
            engines=engines,
            gate=gate,
            rollouts=rollouts,
            resume=resume,
            rewriter_model=rewriter_model,
            budgets=budgets or TaskBudgets.for_run(cfg),
        )


async def _train_loop(
    cfg: RunConfig,
    run_dir: Path,
    *,
    store: AsyncRunStore,
    policy: InferencePool,
    prm: InferencePool | None,
    task_set: list[list[TaskVariant]],
    engines: dict[str, TrainEngine],
    gate: Gate,
    rollouts: RolloutsFactory,
    resume: bool,
    rewriter_model: InferencePool | None,
    budgets: TaskBudgets,
) -> dict[str, Any]:
    started = time.monotonic()
    ckpt = run_dir / "checkpoints"
    metrics = MetricsLogger(run_dir, cfg.metrics, cfg.model_dump(mode="json"))
    selector_file = ckpt / "selector.json"
    selector = make_selector(
        cfg,
        task_set,
        store=store,
        prm=prm,
        rewriter_model=rewriter_model,
        selector_file=selector_file,
        resume=resume,
    )
    await gate.set_versions(learner=engines["policy"].version, serving=engines["policy"].version)

    def on_metrics(role: str, values: dict[str, float], version: int) -> None:
        metrics.log(role, values, version)

    def learner(
        role: Role,
        pool: InferencePool,
        loop_cfg: LearnerLoopConfig,
        leader: LearnerService | None = None,
    ) -> LearnerService:
        # The pool's own replica set: routing and weight sync see the same replicas.
        sync = WeightSync(pool.replicas, cfg.train.sync, run_dir / "exports" / role)
        keeping = (cfg.train.policy if role == "policy" else cfg.train.prm).keeping()
        return LearnerService(
            role,
            engines[role],
            store,
            loop_cfg,
            checkpoint_dir=ckpt,
            sync=sync,
            tasks_per_update=cfg.train.tasks_per_update,
            gate=gate if role == "policy" else None,
            eta=cfg.fleet.eta,
            on_metrics=on_metrics,
            leader=leader,
            keeping=keeping,
        )

    policy_learner = learner("policy", policy, cfg.train.policy_loop)
    # the reward model trains once per policy step, on the same groups (paper); a frozen
    # one (`train.prm.enabled: false`) keeps judging from its starting weights
    prm_learner = (
        learner("prm", prm, cfg.train.prm_loop, policy_learner)
        if prm is not None and "prm" in engines
        else None
    )
    max_updates = cfg.train.max_policy_updates

    async def next_task() -> TaskVariant | None:
        if policy_learner.version >= max_updates:
            return None
        return await selector.next_variant()

    def forecast(groups: int) -> list[TaskVariant]:  # spare desktops' look-ahead
        return [] if policy_learner.version >= max_updates else selector.upcoming(groups)

    learners = [policy_learner, *([prm_learner] if prm_learner else [])]
    source: TaskSource = ForecastSource(next_task, forecast)
    batches = None
    if cfg.train.mode == "sync":  # the next batch waits for this one's update and sync
        batches = SyncBatches(next_task, learners, cfg.train.tasks_per_update)
        source = batches
    progress: RunProgress | None = None

    replay = SuccessReplay(cfg.train.replay, store)
    replay_file = ckpt / "replay.json"
    if resume and replay_file.is_file():
        replay.load_state_dict(json.loads(replay_file.read_text()))
    budgets_file = ckpt / "budgets.json"
    if resume and budgets_file.is_file():
        budgets.load_state_dict(json.loads(budgets_file.read_text()))

    def on_rollout_metrics(group: GroupRecord, samples: GroupSamples, n: int) -> None:
        values = {
            **group_metrics(group, samples, gate, fleet, cfg, started),
            **replay.metrics(group.group_id),
            **budgets.metrics(group),
        }
        metrics.log("rollout", values, n)
        if progress is not None:
            progress.observe_group(values)

    on_group = GroupRouter(
        selector=selector,
        store=store,
        policy=policy_learner,
        prm=prm_learner,
        train=cfg.train,
        adapt=cfg.adapt,
        episode=cfg.episode,
        selector_file=selector_file,
        on_metrics=on_rollout_metrics,
        replay=replay,
        replay_file=replay_file,
        budgets=budgets,
        budgets_file=budgets_file,
        upkeep=StoreUpkeep(store, cfg.store, replay.trajectory_ids),
    )
    fleet = rollouts(source, on_group if batches is None else batches.wrap(on_group))
    progress = RunProgress(fleet, learners, max_updates, cfg.fleet.max_groups, started=started)
    log.info(
        "training (%s): %d task(s), %d desktop(s), up to %d policy updates%s",
        cfg.train.mode,
        len(selector.templates),
        cfg.desktops.count,
        max_updates,
        f" or {cfg.fleet.max_groups} groups" if cfg.fleet.max_groups else "",
    )
    try:
        async with asyncio.TaskGroup() as tasks:
            runs = [tasks.create_task(policy_learner.run(max_updates=max_updates))]
            if prm_learner is not None:
                runs.append(tasks.create_task(prm_learner.run()))
            live = tasks.create_task(live_summary(cfg.metrics, progress, learners, selector))
            await fleet.run()
            progress.phase = "draining"
            log.info(
                "rollouts done (%s); learners train what is queued", progress.snapshot().line()
            )
            for service in learners:
                await service.finish()
            await asyncio.gather(*runs)
            live.cancel()
    finally:
        for service in learners:
            await service.close()
            if service.sync is not None:
                await service.sync.close()
        metrics.close()
    summary = await store.summary()
    return {
        "run_dir": str(run_dir),
        "policy_version": policy_learner.version,
        "prm_version": prm_learner.version if prm_learner else 0,
        **{
            k: summary[k]
            for k in (
                "trajectories",
                "steps",
                "verdicts",
                "aborted",
                "policy_updates",
                "prm_updates",
                "weight_syncs",
                "adapt_proposals",
                "adapt_accepted",
            )
        },
    }
