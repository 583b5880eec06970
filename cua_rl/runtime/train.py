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
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Protocol

from cua_rl import spans
from cua_rl.adapt.config import RewriterConfig
from cua_rl.adapt.critique import Critic
from cua_rl.adapt.rewriter import TaskTemplate, load_difficulty, make_rewriter
from cua_rl.adapt.selector import TemplateSelector
from cua_rl.config import RunConfig
from cua_rl.inference.config import ModelServersConfig
from cua_rl.inference.launcher import (
    default_tiny_dir,
    ensure_tiny_model,
    replica_set,
    resolve_model,
)
from cua_rl.inference.pool import InferencePool
from cua_rl.learner.base import TrainEngine
from cua_rl.learner.config import LearnerLoopConfig
from cua_rl.learner.engines import TransportFactory
from cua_rl.learner.service import LearnerService, Role, latest_checkpoint
from cua_rl.learner.weight_sync import WeightSync
from cua_rl.reward.samples import GroupSamples
from cua_rl.rollout.fleet import Fleet, GroupHandler
from cua_rl.rollout.scheduler import GroupScheduler, TaskSource
from cua_rl.runtime.group_router import GroupRouter
from cua_rl.runtime.local import Components, local_components
from cua_rl.runtime.run_dir import drop_older_resume_exports
from cua_rl.runtime.success_replay import SuccessReplay
from cua_rl.runtime.sync_batches import SyncBatches
from cua_rl.runtime.task_budgets import TaskBudgets
from cua_rl.runtime.telemetry.group_metrics import group_metrics
from cua_rl.runtime.telemetry.live import live_summary
from cua_rl.runtime.telemetry.metrics import MetricsLogger
from cua_rl.runtime.telemetry.progress import RunProgress
from cua_rl.store.run_store import AsyncRunStore
from cua_rl.store.upkeep import StoreUpkeep
from cua_rl.tasks.sources import difficulty_file
from cua_rl.types import GroupRecord, TaskVariant
from cua_rl.version_gate import Gate, VersionGate

log = logging.getLogger(__name__)


async def _engine(cfg: RunConfig, role: str, base: str, run_dir: Path, resume: bool,
                  transport: TransportFactory | None) -> TrainEngine:
    from cua_rl.learner.engines import build_engine

    learner = cfg.train.policy if role == "policy" else cfg.train.prm  # temperature resolved
    loop = asyncio.get_running_loop()
    engine = await loop.run_in_executor(None, functools.partial(
        build_engine, learner, base, name=role, log_dir=run_dir / "logs", transport=transport))
    try:
        found = latest_checkpoint(run_dir / "checkpoints", role) if resume else None  # type: ignore[arg-type]
        if found is not None:
            await loop.run_in_executor(None, engine.load_checkpoint, found[0])
    except BaseException:
        await loop.run_in_executor(None, engine.close)
        raise
    return engine


def _templates(cfg: RunConfig, task_set: list[list[TaskVariant]]
               ) -> tuple[dict[str, TaskTemplate], dict[str, TaskVariant]]:
    # the order of the task source's own pairs (a pair folder's difficulty.json)
    path = cfg.adapt.difficulty or difficulty_file(cfg.tasks.source, cfg.tasks.templates_root)
    difficulty = load_difficulty(path)
    templates, start = {}, {}
    for variants in task_set:
        template = TaskTemplate.from_variants(variants, difficulty.get(variants[0].task_id))
        templates[variants[0].task_id] = template
        # Algorithm 2 starts from the original task (`load_variants` puts it first)
        start[variants[0].task_id] = variants[0]
    return templates, start


async def run_training(cfg: RunConfig, run_dir: Path, *, resume: bool = False
                       ) -> dict[str, Any]:
    """A training run with every component on this machine (`runtime: local`);
    `runtime: ray` is `ray.train.run_training_ray`, which reuses `train` below."""
    async with start_engines(cfg, run_dir, resume) as (engines, served):
        versions = {role: engine.version for role, engine in engines.items()}
        async with local_components(served, run_dir, versions=versions) as parts:
            return await _train(cfg, run_dir, parts, engines, resume)


@contextlib.asynccontextmanager
async def start_engines(cfg: RunConfig, run_dir: Path, resume: bool,
                        transport: TransportFactory | None = None
                        ) -> AsyncIterator[tuple[dict[str, TrainEngine], RunConfig]]:
    """The two learner engines (from their last checkpoints on resume) and the
    config the model servers start from: on resume it serves the checkpointed
    weights, so servers and learners agree on the version. On exit the engines are
    closed (a rank group stops its ranks). `transport`: how a learner with
    `ranks` > 1 places its ranks (default: processes on this machine)."""
    (run_dir / "checkpoints").mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 - once, at start-up
    tiny = cfg.tiny_model_dir or default_tiny_dir()
    if "tiny" in (cfg.policy.model, cfg.prm.model):
        await ensure_tiny_model(tiny)
    loop = asyncio.get_running_loop()
    engines: dict[str, TrainEngine] = {}

    async def start(role: str, servers: ModelServersConfig) -> None:
        engines[role] = await _engine(cfg, role, resolve_model(servers, tiny), run_dir,
                                      resume, transport)

    roles = [("policy", cfg.policy), ("prm", cfg.prm)]
    grouped = {role for role, _ in roles if getattr(cfg.train, role).ranks > 1}
    try:
        # In-process engines one after the other (DeepSpeed's process-wide setup);
        # rank groups at once (their ranks load the model in their own processes).
        for role, servers in roles:
            if role not in grouped:
                await start(role, servers)
        starts = [start(role, servers) for role, servers in roles if role in grouped]
        failed = [r for r in await asyncio.gather(*starts, return_exceptions=True)
                  if isinstance(r, BaseException)]
        if failed:
            raise failed[0]
        engines = {role: engines[role] for role, _ in roles}
        served = cfg.model_copy(deep=True)
        for role, engine in engines.items():
            if engine.version:  # resume: serve the checkpointed weights under their version
                export = run_dir / "exports" / f"{role}-resume-v{engine.version}"
                await loop.run_in_executor(None, engine.export_weights, export)
                getattr(served, role).model = str(export)
                await loop.run_in_executor(None, drop_older_resume_exports,
                                           export.parent, role, export)
        yield engines, served
    finally:
        for engine in engines.values():
            await asyncio.shield(loop.run_in_executor(None, engine.close))


async def _train(cfg: RunConfig, run_dir: Path, parts: Components,
                 engines: dict[str, TrainEngine], resume: bool) -> dict[str, Any]:
    gate = VersionGate(cfg.fleet.eta)
    budgets = TaskBudgets.for_run(cfg)  # the router fills it, the scheduler asks it

    def make_fleet(source: TaskSource, on_group: GroupHandler) -> Fleet:
        scheduler = GroupScheduler(source, cfg.fleet.group_size, max_groups=cfg.fleet.max_groups,
                                   group_ids=lambda: f"g-{uuid.uuid4().hex[:12]}",
                                   budget=budgets.budget if cfg.train.budgets.enabled else None)
        return Fleet(scheduler, parts.desktops, parts.policy, parts.store, cfg.episode,
                     cfg.fleet, judge=parts.judge, gate=gate, on_group=on_group,
                     horizon=cfg.train.horizon)

    return await train(cfg, run_dir, store=parts.store, policy=parts.policy, prm=parts.prm,
                       task_set=parts.task_set, engines=engines, gate=gate, rollouts=make_fleet,
                       resume=resume, budgets=budgets)


class Rollouts(Protocol):
    """What the training loop needs of a fleet, wherever its actors run."""

    counts: Counter[str]
    busy_s: float

    async def run(self) -> Any: ...


RolloutsFactory = Callable[[TaskSource, GroupHandler], Rollouts]
"""Builds the fleet from the loop's task source and finished-group handler."""


async def train(cfg: RunConfig, run_dir: Path, *, store: AsyncRunStore, policy: InferencePool,
                prm: InferencePool | None, task_set: list[list[TaskVariant]],
                engines: dict[str, TrainEngine], gate: Gate, rollouts: RolloutsFactory,
                resume: bool, budgets: TaskBudgets | None = None) -> dict[str, Any]:
    """The training loop on the driver, whichever runtime places the fleet: the
    selector is the fleet's task source, finished groups become samples for the
    learners; `gate` is a `VersionGate` here or a `RemoteGate` to one under Ray.
    `budgets`: the per-task budgets the fleet's scheduler asks (`train.budgets`)."""
    async with rewriter_pool(cfg, run_dir) as rewriter_model, spans.recording(
            run_dir if cfg.metrics.spans else None, cfg.metrics.spans_max_mb * 1024 * 1024):
        return await _train_loop(cfg, run_dir, store=store, policy=policy, prm=prm,
                                 task_set=task_set, engines=engines, gate=gate,
                                 rollouts=rollouts, resume=resume, rewriter_model=rewriter_model,
                                 budgets=budgets or TaskBudgets.for_run(cfg))


@contextlib.asynccontextmanager
async def rewriter_pool(cfg: RunConfig, run_dir: Path) -> AsyncIterator[InferencePool | None]:
    """The model rewriter's own frozen pool (Algorithm 2's rewriting LLM is a fixed
    model, not the reward model being trained); None for the rule rewriter."""
    rewriter = cfg.adapt.rewriter
    if not cfg.adapt.enabled or rewriter.type != "model":
        yield None
        return
    async with replica_set(rewriter.pool, name="rewriter", log_dir=run_dir / "logs",
                           tiny_dir=cfg.tiny_model_dir or default_tiny_dir()) as replicas:
        pool = InferencePool(replicas, rewriter.pool.requests)
        try:
            yield pool
        finally:
            await pool.close()


async def _train_loop(cfg: RunConfig, run_dir: Path, *, store: AsyncRunStore,
                      policy: InferencePool, prm: InferencePool | None,
                      task_set: list[list[TaskVariant]], engines: dict[str, TrainEngine],
                      gate: Gate, rollouts: RolloutsFactory, resume: bool,
                      rewriter_model: InferencePool | None,
                      budgets: TaskBudgets) -> dict[str, Any]:
    started = time.monotonic()
    ckpt = run_dir / "checkpoints"
    metrics = MetricsLogger(run_dir, cfg.metrics, cfg.model_dump(mode="json"))
    templates, start = _templates(cfg, task_set)
    # Without adaptation the selector only serves tasks: its rewriter is never asked.
    rewriter = make_rewriter(cfg.adapt.rewriter if cfg.adapt.enabled else RewriterConfig(),
                             rewriter_model)
    if cfg.adapt.enabled and cfg.adapt.rewriter.type == "rules":
        fixed = sorted(t for t, tpl in templates.items() if not tpl.adaptable_by_rules)
        if fixed:
            log.warning("%d of %d tasks have one variant and no hints: the rule rewriter "
                        "cannot adapt them (adapt.rewriter.type=model can): %s",
                        len(fixed), len(templates), ", ".join(fixed[:5]))
    critic = Critic(prm, cfg.adapt.critique) if prm is not None else None
    selector = TemplateSelector(templates, start, band=cfg.adapt.band, rewriter=rewriter,
                                store=store, critic=critic)
    selector_file = ckpt / "selector.json"
    if resume and selector_file.is_file():
        selector.load_state_dict(json.loads(selector_file.read_text()))
    await gate.set_versions(learner=engines["policy"].version,
                            serving=engines["policy"].version)

    def on_metrics(role: str, values: dict[str, float], version: int) -> None:
        metrics.log(role, values, version)

    def learner(role: Role, pool: InferencePool, loop_cfg: LearnerLoopConfig,
                leader: LearnerService | None = None) -> LearnerService:
        # The pool's own replica set: routing and weight sync see the same replicas.
        sync = WeightSync(pool.replicas, cfg.train.sync, run_dir / "exports" / role)
        return LearnerService(role, engines[role], store, loop_cfg,
                              checkpoint_dir=ckpt, sync=sync,
                              tasks_per_update=cfg.train.tasks_per_update,
                              gate=gate if role == "policy" else None, eta=cfg.fleet.eta,
                              on_metrics=on_metrics, leader=leader)

    policy_learner = learner("policy", policy, cfg.train.policy_loop)
    # the reward model trains once per policy step, on the same groups (paper)
    prm_learner = learner("prm", prm, cfg.train.prm_loop, policy_learner) if prm else None
    max_updates = cfg.train.max_policy_updates

    async def next_task() -> TaskVariant | None:
        if policy_learner.version >= max_updates:
            return None
        return await selector.next_variant()

    learners = [policy_learner, *([prm_learner] if prm_learner else [])]
    source: TaskSource = next_task
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
        values = {**group_metrics(group, samples, gate, fleet, cfg, started),
                  **replay.metrics(group.group_id), **budgets.metrics(group)}
        metrics.log("rollout", values, n)
        if progress is not None:
            progress.observe_group(values)

    on_group = GroupRouter(
        selector=selector, store=store, policy=policy_learner, prm=prm_learner, train=cfg.train,
        adapt=cfg.adapt, episode=cfg.episode, selector_file=selector_file,
        on_metrics=on_rollout_metrics, replay=replay, replay_file=replay_file,
        budgets=budgets, budgets_file=budgets_file,
        upkeep=StoreUpkeep(store, cfg.store, replay.trajectory_ids))
    fleet = rollouts(source, on_group if batches is None else batches.wrap(on_group))
    progress = RunProgress(fleet, learners, max_updates, cfg.fleet.max_groups,
                           started=started)
    log.info("training (%s): %d task(s), %d desktop(s), up to %d policy updates%s",
             cfg.train.mode, len(templates), cfg.desktops.count, max_updates,
             f" or {cfg.fleet.max_groups} groups" if cfg.fleet.max_groups else "")
    try:
        async with asyncio.TaskGroup() as tasks:
            runs = [tasks.create_task(policy_learner.run(max_updates=max_updates))]
            if prm_learner is not None:
                runs.append(tasks.create_task(prm_learner.run()))
            live = tasks.create_task(live_summary(cfg.metrics, progress, learners, selector))
            await fleet.run()
            progress.phase = "draining"
            log.info("rollouts done (%s); learners train what is queued",
                     progress.snapshot().line())
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
    return {"run_dir": str(run_dir), "policy_version": policy_learner.version,
            "prm_version": prm_learner.version if prm_learner else 0,
            **{k: summary[k] for k in ("trajectories", "steps", "verdicts", "aborted",
                                       "policy_updates", "prm_updates", "weight_syncs",
                                       "adapt_proposals", "adapt_accepted")}}
