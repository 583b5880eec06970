"""The `cua-rl tasks verify` command: plan (`cua_rl.tasks.verify`), run the jobs on
local desktops (`cua_rl.tasks.on_desktop`), and write verify.jsonl, verify.json and
verify.md into the output folder as tasks finish."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import click

from cua_rl.command_output import emit_json
from cua_rl.desktop.file_cache import FileCache, default_cache_root
from cua_rl.errors import TaskFormatError
from cua_rl.tasks.on_desktop import Job, Outcome, run_jobs
from cua_rl.tasks.preflight import capabilities_for, preflight
from cua_rl.tasks.sources import load_source
from cua_rl.tasks.verify import (
    GOLDEN_ROOT,
    Ledger,
    Plan,
    Verdict,
    combine,
    markdown,
    plan_verify,
    summarize,
)


def run_plan(plan: Plan, ledger: Ledger, desktops: int, cache_root: Path,
             echo: bool = True) -> None:
    """Run every job of `plan`; each task's verdict goes to the ledger (and a progress
    line to stderr) as soon as both of its jobs are done."""
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
        if echo:
            done = sum(len(h) == 2 for h in halves.values())
            click.echo(f"[{done}/{total} {time.monotonic() - began:.0f} s] {verdict.line()}",
                       err=True)

    if plan.jobs:
        asyncio.run(run_jobs(plan.jobs, desktops, cache_root=cache_root, on_done=on_done))


@click.command("verify")
@click.option("--osworld", "osworld", required=True,
              type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="OSWorld checkout (or its evaluation_examples).")
@click.option("--split", default=None, help="Verify only this split's tasks.")
@click.option("--task", "task_ids", multiple=True, help="Verify only this task id (repeatable).")
@click.option("--desktops", type=click.IntRange(1, 8), default=1, show_default=True,
              help="Local desktops run in parallel.")
@click.option("--cache", "cache_dir", type=click.Path(file_okay=False, path_type=Path),
              default=None, help="Asset cache root [default: $CUA_RL_CACHE_DIR or "
              "~/.cache/cua-rl/files].")
@click.option("--golden-root", type=click.Path(exists=True, file_okay=False, path_type=Path),
              default=GOLDEN_ROOT, show_default=True,
              help="Folder holding golden/<domain>/<task id>.json.")
@click.option("--real-assets", is_flag=True,
              help="The cache holds the task set's real assets, not stand-ins: also attempt "
              "tasks judged against a gold file and those listed in the golden root's "
              "needs_real_assets.json.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path("verify-report"), show_default=True,
              help="Where verify.jsonl (resumable), verify.json and verify.md go.")
@click.option("--fresh", is_flag=True, help="Forget the verdicts of an earlier run in --out.")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON summary only.")
def verify_tasks(osworld: Path, split: str | None, task_ids: tuple[str, ...], desktops: int,
                 cache_dir: Path | None, golden_root: Path, real_assets: bool, out_dir: Path,
                 fresh: bool, as_json: bool) -> None:
    """Per task, on fresh local desktops: setup + golden solution must score 1, setup +
    nothing must score 0 (infeasible tasks: a declared failure scores 1). Resumable."""
    try:
        load = load_source(f"osworld:{osworld}", split)
        ledger = Ledger(out_dir, fresh=fresh)
    except TaskFormatError as exc:
        raise click.ClickException(str(exc)) from exc
    tasks = load.tasks
    if task_ids:
        unknown = sorted(set(task_ids) - {t.task_id for t in tasks})
        if unknown:
            raise click.BadParameter(f"not in {osworld}: {', '.join(unknown)}",
                                     param_hint="--task")
        tasks = [t for t in tasks if t.task_id in set(task_ids)]
    cache = FileCache(cache_dir or default_cache_root())
    checked = preflight(tasks, capabilities_for("local"), cache, load.unimplemented)
    todo = [t for t in tasks if not ledger.settled(t.task_id)]
    try:
        plan = plan_verify(todo, set(checked.runnable), checked.details, golden_root,
                           real_assets)
    except TaskFormatError as exc:
        raise click.ClickException(str(exc)) from exc
    for verdict in plan.decided:
        ledger.add(verdict)
    if not as_json:
        click.echo(f"verify: {len(tasks)} task(s), {len(tasks) - len(todo)} already settled in "
                   f"{ledger.path}, {len(plan.pending)} to run on {desktops} desktop(s)",
                   err=True)
    began = time.monotonic()
    run_plan(plan, ledger, desktops, cache.root, echo=not as_json)
    wanted = {t.task_id for t in tasks}
    verdicts: list[Verdict] = [v for v in ledger.done.values() if v.task_id in wanted]
    summary = summarize(verdicts, time.monotonic() - began)
    (out_dir / "verify.json").write_text(json.dumps(summary, indent=1) + "\n")
    (out_dir / "verify.md").write_text(markdown(summary))
    if as_json:
        emit_json(summary)
        return
    for verdict in sorted(verdicts, key=lambda v: (v.domain, v.task_id)):
        if verdict.status in ("fail_golden", "fail_untouched", "error") or not verdict.ok:
            click.echo(verdict.line())
    click.echo(f"verify: {summary['passed']}/{summary['attempted']} attempted pass, "
               f"statuses {json.dumps(summary['statuses'])}; report {out_dir / 'verify.md'}",
               err=True)
