"""A rollout run: the fleet over the task set, verdicts streamed, nothing trained."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

from cua_rl.config import RunConfig
from cua_rl.rollout.fleet import Fleet
from cua_rl.rollout.scheduler import GroupScheduler
from cua_rl.runtime.local import local_components, task_cycle
from cua_rl.runtime.telemetry.live import status_lines
from cua_rl.runtime.telemetry.progress import RunProgress


async def run_rollouts(cfg: RunConfig, run_dir: Path) -> Counter[str]:
    async with local_components(cfg, run_dir) as parts:
        starts = [variants[0] for variants in parts.task_set]
        scheduler = GroupScheduler(
            task_cycle(starts, cfg.fleet.max_groups),
            cfg.fleet.group_size,
            max_groups=cfg.fleet.max_groups,
        )
        fleet = Fleet(
            scheduler,
            parts.desktops,
            parts.policy,
            parts.store,
            cfg.episode,
            cfg.fleet,
            judge=parts.judge,
            seed=cfg.seed,
        )
        progress = RunProgress(
            fleet, [], max_updates=0, max_groups=cfg.fleet.max_groups, phase="rollout"
        )
        async with asyncio.TaskGroup() as tasks:
            status = tasks.create_task(status_lines(cfg.metrics.status_interval_s, progress))
            counts = await fleet.run()
            status.cancel()
        counts["desktop_replacements"] = parts.pool.replacements
        return counts
