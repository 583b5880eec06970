"""Setup per rollout against setup once plus a fork per rollout, per provider
(`cua-rl bench desktops --forks`).

For each task (by default the five forkable tasks of the source with the longest
setups, `long_setups`) a group of `group_size` rollouts is prepared on two desktops
of the provider twice, in one run: once as without forks (each rollout resets its
desktop and runs the setup) and once as `fleet.fork_groups` does (one setup saved as
a fork point, then a restore per rollout). Both are wall times of the whole group's
preparation, with the medians of each operation beside them, and the no-op score of
the first rollout each way (they must agree). A provider that cannot fork reports
its reason and the per-rollout figures only; a task whose setup fails on the image
(an app it lacks) is one error line, the others go on.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from pathlib import Path
from typing import Any

from cua_rl.desktop.file_cache import FileCache
from cua_rl.desktop.fork_safety import setup_not_forkable
from cua_rl.desktop.pool import DesktopPool
from cua_rl.errors import CuaRlError
from cua_rl.rollout.config import EpisodeConfig
from cua_rl.rollout.guest_desktop import PoolDesktops
from cua_rl.rollout.scheduler import RolloutTicket
from cua_rl.types import TaskVariant

STEP_COST_S = {
    "launch": 5.0,
    "open": 5.0,
    "chrome_open_tabs": 8.0,
    "download": 2.0,
    "execute": 1.0,
    "command": 1.0,
    "upload_file": 1.0,
    "activate_window": 1.0,
}
"""A rough cost per setup step, only to rank tasks by how long their setup runs
(`sleep` steps count their seconds)."""


def setup_cost(variant: TaskVariant) -> float:
    cost = 0.0
    for step in variant.config:
        kind = str(step.get("type", ""))
        if kind == "sleep":
            seconds = step.get("parameters", {}).get("seconds", 0)
            cost += float(seconds) if isinstance(seconds, int | float) else 0.0
        else:
            cost += STEP_COST_S.get(kind, 0.5)
    return cost


def long_setups(variants: list[TaskVariant], count: int = 5) -> list[TaskVariant]:
    """The `count` forkable variants with the longest setups (ties: task id order)."""
    forkable = [v for v in variants if setup_not_forkable(v.task_id, v.config) is None]
    return sorted(forkable, key=lambda v: (-setup_cost(v), v.task_id))[:count]


async def _group(
    desktops: PoolDesktops, variant: TaskVariant, group_size: int, fork: bool
) -> dict[str, Any]:
    """Prepare a group of rollouts (2 desktops, `group_size` rollouts); the wall time,
    the first rollout's no-op score, and the operations' medians from the spans."""
    scores: dict[int, float] = {}
    took: list[float] = []

    async def rollout(slot: int) -> None:
        ticket = RolloutTicket(f"bench-{variant.task_id[:8]}-{fork}", variant, slot)
        async with desktops.lease(ticket if fork else None) as desktop:
            began = time.monotonic()
            await desktop.prepare(variant)
            took.append(time.monotonic() - began)
            if slot == 0:
                scores[slot] = await desktop.evaluate(variant, None)

    began = time.monotonic()
    await asyncio.gather(*(rollout(k) for k in range(group_size)))
    wall = time.monotonic() - began
    if fork:
        desktops.group_done(f"bench-{variant.task_id[:8]}-{fork}")
    return {
        "group_s": round(wall, 2),
        "prepare_median_s": round(statistics.median(took), 2),
        "prepare_max_s": round(max(took), 2),
        "noop_score": scores.get(0),
    }


async def bench_forks(
    provider_name: str,
    fields: dict[str, Any],
    variants: list[TaskVariant],
    work: Path,
    group_size: int = 4,
) -> dict[str, Any]:
    """Per task: the group prepared per rollout and, where the provider forks, from one
    setup; on two desktops of `provider_name` (configured by `fields`)."""
    from cua_rl.bench.desktops import make

    provider = make(provider_name, **fields)
    why_not = provider.fork_support()
    pool = DesktopPool(provider, 2, id_prefix=f"bench-fork-{os.getpid()}", health_interval_s=3600)
    began = time.monotonic()
    await pool.start()
    out: dict[str, Any] = {
        "start_s": round(time.monotonic() - began, 1),
        "tasks": {},
        "fork_support": why_not or "yes",
    }
    from cua_rl.desktop.file_cache import default_cache_root

    # the runs' asset cache ($CUA_RL_CACHE_DIR): OSWorld's files, or stand-ins seeded there
    desktops = PoolDesktops(
        pool,
        cache=FileCache(default_cache_root()),
        work_root=work / "work",
        cfg=EpisodeConfig(settle_max_s=20.0),
        forks=why_not is None,
    )
    try:
        async with desktops.ahead(_NoLookahead()):  # type: ignore[arg-type]  # a scheduler stand-in with only what ahead() uses
            for variant in variants:
                entry: dict[str, Any] = {"setup_cost_estimate_s": setup_cost(variant)}
                try:
                    entry["per_rollout"] = await _group(desktops, variant, group_size, False)
                    if why_not is None:
                        entry["forked"] = await _group(desktops, variant, group_size, True)
                        entry["speedup"] = round(
                            entry["per_rollout"]["group_s"] / max(entry["forked"]["group_s"], 1e-3),
                            2,
                        )
                except CuaRlError as exc:
                    entry["error"] = str(exc).splitlines()[0][:300]
                out["tasks"][variant.task_id] = entry
        out["counts"] = desktops.figures()
    finally:
        await pool.close()
        await provider.close()
    return out


class _NoLookahead:
    """`PoolDesktops.ahead` without spares reads nothing of a scheduler."""

    group_size = 1

    def upcoming(self, limit: int) -> list[object]:
        return []


def fork_variants(source: str, ids: list[str], count: int) -> list[TaskVariant]:
    """The tasks to time: `ids` of `source` (in that order), else its `count` forkable
    tasks with the longest setups."""
    from cua_rl.tasks.sources import DATA_ROOT, load_task_set

    task_set = load_task_set(source, None, ids, DATA_ROOT)
    starts = [variants[0] for variants in task_set]
    return starts if ids else long_setups(starts, count)


def measure_forks(
    names: list[str],
    fields: dict[str, dict[str, Any]],
    source: str,
    ids: list[str],
    count: int,
    group_size: int,
    work: Path,
) -> dict[str, Any]:
    """`bench_forks` for each provider of `names` on the same tasks (a provider that
    fails is one error line in its entry, the others go on)."""
    from cua_rl.bench.desktops import machine

    variants = fork_variants(source, ids, count)
    out: dict[str, Any] = {
        "machine_before": machine(),
        "source": source,
        "group_size": group_size,
        "tasks": [v.task_id for v in variants],
    }
    for name in names:
        try:
            out[name] = asyncio.run(
                bench_forks(name, fields[name], variants, work / name, group_size)
            )
        except CuaRlError as exc:
            out[name] = {"error": str(exc).splitlines()[0]}
    out["machine_after"] = machine()
    return out
