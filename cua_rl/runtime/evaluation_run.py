"""An OSWorld evaluation run: every task of the set `runs` times with the
evaluation protocol of the config, nothing trained; resumable from its run store.

A task run is one fleet group of size 1 whose group id is `<task_id>#<run_index>`
(`cua_rl.report.eval_report.task_run_id`). The run store is the ledger: a task
run is done once a trajectory of its group is stored as finished or step_limit.
Running again with the same run directory schedules only the missing task runs,
so an interrupted evaluation loses at most the episodes that were in flight.
Aborted attempts are re-queued by the fleet and never count; a task run the
fleet gives up on stays missing and is tried again by the next invocation. A
task run whose setup failed is stored as `setup_failed` with its reason, is
neither retried nor run again, and the report counts it apart (never as a 0).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from cua_rl.config import RunConfig
from cua_rl.report.eval_output import write_report
from cua_rl.report.eval_report import (
    RunRecord,
    build_report,
    done_task_runs,
    records_from_store,
    setup_failures_from_store,
    task_run_id,
)
from cua_rl.report.manifest.differences import summarize
from cua_rl.report.manifest.files import begin, finish, read_manifest, write_manifest
from cua_rl.report.osworld_layout import LAYOUT_DIR, write_osworld_results
from cua_rl.rollout.fleet import Fleet
from cua_rl.rollout.scheduler import GroupScheduler
from cua_rl.runtime.local import load_run_tasks, local_components
from cua_rl.store.run_store import DB_NAME, RunStore
from cua_rl.types import GroupRecord, TaskVariant

log = logging.getLogger(__name__)


class EvalProgress(Protocol):
    """Told how far the evaluation is (the CLI draws a progress bar from it)."""

    def start(self, total: int, done_scores: Sequence[float]) -> None:
        """Before any episode: task runs in scope and the scores already stored."""

    def advance(self, group_id: str, score: float) -> None:
        """A task run was scored."""


@dataclass(frozen=True, slots=True)
class TaskRun:
    variant: TaskVariant
    run_index: int

    @property
    def group_id(self) -> str:
        return task_run_id(self.variant.task_id, self.run_index)


def plan_task_runs(starts: Sequence[TaskVariant], runs: int, done: set[str]) -> list[TaskRun]:
    """The missing task runs, run-major (every task's run 0 before any run 1), so
    an interrupted evaluation has covered as many tasks as possible."""
    return [
        TaskRun(v, k) for k in range(runs) for v in starts if task_run_id(v.task_id, k) not in done
    ]


class TaskRunQueue:
    """The scheduler's task source and group-id source in one.

    `GroupScheduler.next_ticket` asks the source for a variant and then for the
    group id, one caller at a time (no other variant is taken in between); so
    the id handed out is always the one of the task run just taken.
    """

    def __init__(self, todo: Sequence[TaskRun]) -> None:
        self._todo = deque(todo)
        self._current = ""

    async def next_variant(self) -> TaskVariant | None:
        if not self._todo:
            return None
        run = self._todo.popleft()
        self._current = run.group_id
        return run.variant

    def group_id(self) -> str:
        return self._current


@dataclass
class EvalResult:
    run_dir: Path
    total: int
    """Task runs in scope (tasks x runs)."""
    done_before: int
    done_now: int
    report: dict[str, Any] = field(default_factory=dict)
    report_files: list[Path] = field(default_factory=list)
    counts: dict[str, float] = field(default_factory=dict)

    @property
    def missing(self) -> int:
        return self.total - self.done_before - self.done_now


def protocol_of(cfg: RunConfig) -> dict[str, Any]:
    """The settings a reader needs to compare this report with others."""
    return {
        "max_steps": cfg.episode.max_steps,
        "temperature": cfg.episode.temperature,
        "wait_after_action_s": cfg.episode.wait_after_action_s,
        "source": cfg.tasks.source,
        "split": cfg.tasks.split,
    }


def _stored_records(run_dir: Path) -> tuple[list[RunRecord], dict[str, str]]:
    """Scored task runs, and the task runs whose setup failed (group id -> reason)."""
    if not (run_dir / DB_NAME).exists():
        return [], {}
    store = RunStore(run_dir)
    try:
        return records_from_store(store), setup_failures_from_store(store)
    finally:
        store.close()


def write_layout(run_dir: Path, report: dict[str, Any], model: str) -> Path:
    """The scored task runs in OSWorld's results layout (RUN_DIR/osworld-results,
    `report.osworld_layout`); folders written by an earlier invocation are kept."""
    store = RunStore.read_only(run_dir)
    try:
        return write_osworld_results(store, report, run_dir / LAYOUT_DIR, model).root
    finally:
        store.close()


def preflight_unsupported(cfg: RunConfig, starts: Sequence[TaskVariant]) -> dict[str, str]:
    """Task id -> why the run's provider cannot run it here (`cua-rl tasks check`)."""
    from cua_rl.desktop.file_cache import FileCache
    from cua_rl.runtime.local import host_cache_dir
    from cua_rl.tasks.preflight import capabilities_for, preflight

    check = preflight(starts, capabilities_for(cfg.desktops.provider), FileCache(host_cache_dir()))
    return dict(check.details)


def planned_manifest(
    cfg: RunConfig, runs: int, *, full_hash: bool = False, previous: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The manifest an evaluation of `cfg` would write now (`report.manifest`): it
    reads the model's headers, the task files and assets, tool versions; it starts
    nothing."""
    from cua_rl.desktop.file_cache import FileCache
    from cua_rl.report.manifest.build import build_manifest
    from cua_rl.runtime.local import host_cache_dir

    starts = [variants[0] for variants in load_run_tasks(cfg)]
    return build_manifest(
        cfg, starts, runs, FileCache(host_cache_dir()), full_hash=full_hash, previous=previous
    )


async def _begin_manifest(
    cfg: RunConfig, run_dir: Path, runs: int, full_hash: bool, planned: dict[str, Any] | None
) -> dict[str, Any]:
    """Write manifest.json before anything starts: `planned` (or a new one), or for a
    resumed evaluation the stored one with this invocation added (`manifest.files`)."""
    if planned is None:
        planned = await asyncio.to_thread(
            planned_manifest, cfg, runs, full_hash=full_hash, previous=read_manifest(run_dir)
        )
    manifest, found = begin(run_dir, planned)
    if found:
        log.warning("resuming %s under another manifest: %s", run_dir, "; ".join(summarize(found)))
    write_manifest(run_dir, manifest)
    return manifest


async def run_evaluation(
    cfg: RunConfig,
    run_dir: Path,
    runs: int = 3,
    *,
    progress: EvalProgress | None = None,
    check: bool = True,
    full_hash: bool = False,
    manifest: dict[str, Any] | None = None,
) -> EvalResult:
    """Run the missing task runs of `cfg`'s task set, then write the report.

    Before anything starts, manifest.json records what runs (`manifest`, if the
    caller built it already, e.g. for `eval --like`; `full_hash`: the weights' and
    disk image's full content hashes too). With `check`, the preflight of `cua-rl
    tasks check` runs first: tasks that cannot run here (an app missing,
    credentials, root, the internet, uncached assets) are not attempted and are
    reported as unsupported with the reason, instead of failing again and again.
    Nothing is started (no model server, no desktop) when every task run is
    already in the store or unsupported: the report is just written again.
    """
    if runs < 1:
        raise ValueError(f"runs must be >= 1, got {runs}")
    task_set = load_run_tasks(cfg)
    all_starts = [variants[0] for variants in task_set]
    unsupported = preflight_unsupported(cfg, all_starts) if check else {}
    starts = [v for v in all_starts if v.task_id not in unsupported]
    records, setup_failed = _stored_records(run_dir)
    # A setup failure is permanent (it would fail the same way): not run again.
    done = done_task_runs((r for r in records if r.run_index < runs), setup_failed)
    todo = plan_task_runs(starts, runs, done)
    total = len(starts) * runs
    if progress is not None:
        in_scope = {task_run_id(v.task_id, k) for v in starts for k in range(runs)}
        first: dict[str, float] = {}
        for r in records:
            first.setdefault(task_run_id(r.task_id, r.run_index), r.score)
        progress.start(total, [s for g, s in first.items() if g in in_scope])
    done_now = 0
    counts: dict[str, float] = {}
    stored = read_manifest(run_dir)
    if todo or stored is None:
        stored = await _begin_manifest(cfg, run_dir, runs, full_hash, manifest)
    if todo:
        started = time.monotonic()

        async def on_group(finished: GroupRecord) -> None:
            nonlocal done_now
            for traj in finished.trajectories:
                done_now += 1
                if progress is not None:
                    progress.advance(finished.group_id, traj.score or 0.0)

        async with local_components(cfg, run_dir) as parts:
            queue = TaskRunQueue(todo)
            scheduler = GroupScheduler(
                queue.next_variant, 1, max_groups=cfg.fleet.max_groups, group_ids=queue.group_id
            )
            fleet = Fleet(
                scheduler,
                parts.desktops,
                parts.policy,
                parts.store,
                cfg.episode,
                cfg.fleet,
                judge=parts.judge,
                on_group=on_group,
                seed=cfg.seed,
            )
            counts = dict(await fleet.run())
            counts["desktop_replacements"] = parts.pool.replacements
        counts["wall_s"] = time.monotonic() - started
        records, setup_failed = _stored_records(run_dir)
    if todo or stored.get("run", {}).get("ended_at") is None:
        stored = finish(run_dir, stored)
    report = build_report(
        records,
        {v.task_id: v.domain for v in all_starts},
        runs,
        protocol_of(cfg),
        setup_failed=setup_failed,
        unsupported=unsupported,
    )
    files = write_report(
        report, run_dir, title=f"OSWorld evaluation ({run_dir.name})", manifest=stored
    )
    if records:
        files.append(await asyncio.to_thread(write_layout, run_dir, report, cfg.policy.model))
    return EvalResult(run_dir, total, total - len(todo), done_now, report, files, counts)
