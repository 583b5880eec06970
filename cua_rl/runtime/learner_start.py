"""The learner engines of a training run, started before anything else: each from its
last checkpoint on `--resume`, on its devices (runtime/devices.py), as in-process
engines, local rank processes or Ray rank actors (`transport`).

Started before the model servers, so that on resume the servers start from the
checkpointed weights under their version and servers and learners agree on it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from cua_rl.config import RunConfig
from cua_rl.config.roles import run_roles
from cua_rl.inference.config import ModelServersConfig
from cua_rl.inference.launcher import default_tiny_dir, ensure_tiny_model, resolve_model
from cua_rl.learner.base import TrainEngine
from cua_rl.learner.engines import TransportFactory
from cua_rl.learner.service import latest_checkpoint
from cua_rl.process_launch import ProcessLaunch, record_launch
from cua_rl.runtime.devices import (
    DeviceLayout,
    in_driver,
    in_driver_rank,
    learner_on_gpu,
    local_ranks,
    rank_devices,
)
from cua_rl.runtime.run_dir import drop_older_resume_exports


async def _engine(
    cfg: RunConfig,
    role: str,
    base: str,
    run_dir: Path,
    resume: bool,
    transport: TransportFactory | None,
    layout: DeviceLayout,
) -> TrainEngine:
    from cua_rl.learner.engines import build_engine

    learner = cfg.train.policy if role == "policy" else cfg.train.prm  # temperature resolved
    learner = in_driver(learner, layout, role)
    # under Ray (a transport given) a GPU learner is Ray's to place, even of one rank
    grouped = transport is not None and learner_on_gpu(learner)
    if transport is None and (devices := rank_devices(layout, role, learner.ranks)):
        transport = local_ranks(devices)
    loop = asyncio.get_running_loop()

    if learner.ranks == 1 and not grouped:  # the driver's own: recorded as the dry run has it
        record_launch(
            ProcessLaunch(
                f"{role} learner (in the driver)",
                (),
                {},
                layout.assigned.get(f"{role} learner (in the driver)", ()),
            )
        )

    def build() -> TrainEngine:
        with in_driver_rank(layout, role):
            return build_engine(
                learner,
                base,
                name=role,
                log_dir=run_dir / "logs",
                transport=transport,
                grouped=grouped,
            )

    engine = await loop.run_in_executor(None, build)
    try:
        found = latest_checkpoint(run_dir / "checkpoints", role) if resume else None  # type: ignore[arg-type]  # run_dir is set whenever resume is
        if found is not None:
            await loop.run_in_executor(None, engine.load_checkpoint, found[0])
    except BaseException:
        await loop.run_in_executor(None, engine.close)
        raise
    return engine


@contextlib.asynccontextmanager
async def start_engines(
    cfg: RunConfig,
    run_dir: Path,
    resume: bool,
    transport: TransportFactory | None = None,
    layout: DeviceLayout | None = None,
) -> AsyncIterator[tuple[dict[str, TrainEngine], RunConfig]]:
    """The two learner engines (from their last checkpoints on resume) and the
    config the model servers start from: on resume it serves the checkpointed
    weights, so servers and learners agree on the version. On exit the engines are
    closed (a rank group stops its ranks). `transport`: how a learner with
    `ranks` > 1 places its ranks (default: processes on this machine, each on its
    device of `layout`)."""
    layout = layout or DeviceLayout(())
    (run_dir / "checkpoints").mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 - once, at start-up
    tiny = cfg.tiny_model_dir or default_tiny_dir()
    if "tiny" in (cfg.policy.model, cfg.prm.model):
        await ensure_tiny_model(tiny)
    loop = asyncio.get_running_loop()
    engines: dict[str, TrainEngine] = {}

    async def start(role: str, servers: ModelServersConfig) -> None:
        engines[role] = await _engine(
            cfg, role, resolve_model(servers, tiny), run_dir, resume, transport, layout
        )

    # a frozen reward model (`train.prm.enabled: false`) or no judge: no reward-model learner
    roles = [(role, getattr(cfg, role)) for role in run_roles(cfg).learners]
    grouped = {
        role
        for role, _ in roles
        if getattr(cfg.train, role).ranks > 1
        or (transport is not None and learner_on_gpu(getattr(cfg.train, role)))
    }
    try:
        # In-process engines one after the other (DeepSpeed's process-wide setup);
        # rank groups at once (their ranks load the model in their own processes).
        for role, servers in roles:
            if role not in grouped:
                await start(role, servers)
        starts = [start(role, servers) for role, servers in roles if role in grouped]
        failed = [
            r
            for r in await asyncio.gather(*starts, return_exceptions=True)
            if isinstance(r, BaseException)
        ]
        if failed:
            raise failed[0]
        engines = {role: engines[role] for role, _ in roles}
        served = cfg.model_copy(deep=True)
        for role, engine in engines.items():
            if engine.version:  # resume: serve the checkpointed weights under their version
                export = run_dir / "exports" / f"{role}-resume-v{engine.version}"
                await loop.run_in_executor(None, engine.export_weights, export)
                getattr(served, role).model = str(export)
                await loop.run_in_executor(
                    None, drop_older_resume_exports, export.parent, role, export
                )
        yield engines, served
    finally:
        for engine in engines.values():
            await asyncio.shield(loop.run_in_executor(None, engine.close))
