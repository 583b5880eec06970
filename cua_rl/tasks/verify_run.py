"""Running `cua-rl tasks verify`: plan (`cua_rl.tasks.verify`), run the jobs on the
provider's desktops (`cua_rl.tasks.on_desktop`; which ones: `verify_desktops`), and
write verify.jsonl, verify.json and verify.md into the output folder as tasks finish
(so an interrupted run resumes)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from cua_rl.desktop.file_cache import FileCache
from cua_rl.tasks.capabilities import HostCapabilities, local_capabilities
from cua_rl.tasks.check_jobs import Job, Outcome
from cua_rl.tasks.on_desktop import JOB_TIMEOUT_S, run_jobs
from cua_rl.tasks.preflight import preflight
from cua_rl.tasks.verify import Ledger, Plan, Verdict, combine, markdown, plan_verify, summarize
from cua_rl.types import TaskVariant


def plan_run(
    tasks: Sequence[TaskVariant],
    unimplemented: dict[str, list[str]],
    ledger: Ledger,
    cache: FileCache,
    golden_root: Path,
    real_assets: bool,
    host: HostCapabilities | None = None,
) -> tuple[list[TaskVariant], Plan]:
    """(tasks the ledger has not settled, their plan); the verdicts decided without a
    desktop (not runnable on `host`, default local desktops; not provable) go to the
    ledger at once."""
    checked = preflight(tasks, host or local_capabilities(), cache, unimplemented)
    todo = [t for t in tasks if not ledger.settled(t.task_id)]
    plan = plan_verify(todo, set(checked.runnable), checked.details, golden_root, real_assets)
    for verdict in plan.decided:
        ledger.add(verdict)
    return todo, plan


def run_plan(
    plan: Plan,
    ledger: Ledger,
    desktops: int,
    cache_root: Path,
    on_progress: Callable[[str], None] | None = None,
    provider_config: Any = None,
    job_timeout_s: float = JOB_TIMEOUT_S,
) -> None:
    """Run every job of `plan` on `desktops` desktops of `provider_config` (default
    local); each task's verdict goes to the ledger (and a progress line to
    `on_progress`) as soon as both of its jobs are done."""
    halves: dict[str, dict[str, Outcome]] = {}
    total = len(plan.pending)
    began = time.monotonic()

    def on_done(job: Job, outcomes: list[Outcome]) -> None:
        task = job.task
        half = "untouched" if job.golden is None else "solved"
        halves.setdefault(task.task_id, {})[half] = outcomes[0]
        got = halves[task.task_id]
        if len(got) < 2:
            return
        verdict = combine(task, got["untouched"], got["solved"])
        ledger.add(verdict)
        if on_progress is not None:
            done = sum(len(h) == 2 for h in halves.values())
            on_progress(f"[{done}/{total} {time.monotonic() - began:.0f} s] {verdict.line()}")

    if plan.jobs:
        asyncio.run(
            run_jobs(
                plan.jobs,
                desktops,
                provider_config,
                cache_root=cache_root,
                on_done=on_done,
                job_timeout_s=job_timeout_s,
            )
        )


def write_report(
    tasks: Sequence[TaskVariant],
    ledger: Ledger,
    out_dir: Path,
    seconds: float,
    desktops: dict[str, str] | None = None,
) -> tuple[dict[str, Any], list[Verdict]]:
    """The summary of the verdicts of `tasks` (written to verify.json and verify.md in
    `out_dir`; `desktops`: the provider and image they ran on) and those verdicts."""
    wanted = {t.task_id for t in tasks}
    verdicts = [v for v in ledger.done.values() if v.task_id in wanted]
    summary = summarize(verdicts, seconds)
    if desktops:
        summary = {**desktops, **summary}
    (out_dir / "verify.json").write_text(json.dumps(summary, indent=1) + "\n")
    (out_dir / "verify.md").write_text(markdown(summary))
    return summary, verdicts
