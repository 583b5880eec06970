"""`cua-rl tasks ...`: list, show and check task files.

Problem lines go to stdout as `file: $.json.path: what was expected`, one per
problem, so they can be grepped and fixed one by one; a summary goes to stderr.
The exit status is 1 when any problem was found. `tasks check` prints one line
per task (`id  domain  runnable | reason: detail`), or with --json the summary
`{"total", "runnable", "not_runnable": {reason: [ids]}}`, and writes the runnable
ids as a split file that `--split` accepts. What is checked lives in
`cua_rl.tasks` (validation, preflight, runnable, verify_run, coverage); this
module parses the flags and prints.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from cua_rl.command_output import emit_json
from cua_rl.desktop.file_cache import FileCache, default_cache_root
from cua_rl.errors import TaskFormatError
from cua_rl.tasks.osworld import TaskLoad
from cua_rl.tasks.pairs import load_variants
from cua_rl.tasks.runnable import PROVIDERS
from cua_rl.tasks.sources import SOURCE_FORMS, load_source, templates_root_of
from cua_rl.tasks.validation import NAMES_UNCHECKED, validate_load
from cua_rl.tasks.verify import GOLDEN_ROOT


def _load(source: str, split: str | None) -> TaskLoad:
    """Tasks of `--source`/`--osworld`, restricted to `--split` when given."""
    try:
        return load_source(source, split)
    except TaskFormatError as exc:
        raise click.ClickException(str(exc)) from exc


def _report(load: TaskLoad, lines: list[str] | None = None) -> None:
    """Problem lines to stdout (or into `lines`, for --json), the count to stderr."""
    for problem in load.problems:
        if lines is None:
            click.echo(str(problem))
        else:
            lines.append(str(problem))
    if load.problems:
        click.echo(f"{len(load.problems)} problem(s); those task files are skipped", err=True)


def _source_options(command: Callable[..., None]) -> Callable[..., None]:
    """The options every `tasks` subcommand shares: --source or --osworld, --split
    and --root (the same names `train`, `eval` and `templates` use; the old
    `--templates-root` still works, hidden). The command receives `source` and
    `templates_root` (a `pairs:DIR` source's own root unless --root is given)."""

    @functools.wraps(command)
    def wrapped(*args: Any, source: str | None, osworld: Path | None, root: Path | None,
                old_root: Path | None, **kwargs: Any) -> Any:
        if osworld is not None and source is not None:
            raise click.UsageError("give --source or --osworld, not both")
        kwargs["source"] = f"osworld:{osworld}" if osworld is not None else source or "local"
        kwargs["templates_root"] = templates_root_of(kwargs["source"], root or old_root)
        return command(*args, **kwargs)

    for option in reversed([
        click.option("--source", help=f"Where tasks come from: {SOURCE_FORMS} "
                     "[default: local].", default=None),
        click.option("--osworld", type=click.Path(file_okay=False, path_type=Path),
                     help="An OSWorld checkout (or its evaluation_examples): the same as "
                     "--source osworld:PATH."),
        click.option("--split", help="A shipped split name or a .txt/.json split file."),
        click.option("--root", type=click.Path(file_okay=False, path_type=Path),
                     help="Folder with templates/ and evaluators/ (task variants) [default: "
                     "this project's; a pairs:DIR source always reads DIR]."),
        click.option("--templates-root", "old_root", hidden=True,
                     type=click.Path(file_okay=False, path_type=Path)),
    ]):
        wrapped = option(wrapped)
    return wrapped


@click.group()
def tasks() -> None:
    """List, show and check task files (OSWorld checkout or the local suite)."""


@tasks.command("list")
@_source_options
@click.option(
    "--json", "as_json", is_flag=True, help="Objects with id, domain, instruction, variants."
)
def list_tasks(source: str, split: str | None, templates_root: Path, as_json: bool) -> None:
    """Print one task id per line."""
    load = _load(source, split)
    rows = []
    for task in load.tasks:
        if not as_json:
            click.echo(task.task_id)
            continue
        try:
            variants = [v.evaluator_name for v in load_variants(task, templates_root)]
        except TaskFormatError as exc:
            click.echo(str(exc), err=True)
            variants = []
        rows.append(
            {
                "id": task.task_id,
                "domain": task.domain,
                "instruction": task.instruction,
                "variants": variants,
            }
        )
    if as_json:
        emit_json(rows)
    _report(load, [] if as_json else None)
    if load.problems:
        raise SystemExit(1)


@tasks.command("show")
@click.argument("task_id")
@_source_options
@click.option("--json", "as_json", is_flag=True,
              help="Accepted for uniformity: the task is always printed as JSON.")
def show_task(task_id: str, source: str, split: str | None, templates_root: Path,
              as_json: bool) -> None:
    """Print one task and its variants as JSON."""
    load = _load(source, split)
    task = next((t for t in load.tasks if t.task_id == task_id), None)
    if task is None:
        _report(load)
        raise click.ClickException(
            f"task {task_id!r} not found in {source}" + (f" (split {split})" if split else "")
        )
    try:
        variants = load_variants(task, templates_root)
    except TaskFormatError as exc:
        raise click.ClickException(str(exc)) from exc
    shown = {k: v for k, v in asdict(task).items() if k != "evaluator_name"}
    shown["variants"] = [
        {"name": v.evaluator_name, "instruction": v.instruction, "evaluator": v.evaluator}
        for v in variants
    ]
    emit_json(shown)


@tasks.command("validate")
@_source_options
@click.option("--json", "as_json", is_flag=True,
              help="Print {tasks, variants, problems, unknown_names, names_checked} only.")
def validate_tasks(source: str, split: str | None, templates_root: Path, as_json: bool) -> None:
    """Report malformed tasks and unknown metric/getter/setup-step names (exit 1)."""
    load = _load(source, split)
    problem_lines: list[str] = []
    _report(load, problem_lines)
    found = validate_load(load, templates_root)
    problem_lines += found.problems
    unknown_lines = found.unknown_names
    if report_validation(
        {"tasks": len(load.tasks), "variants": found.variants, "problems": problem_lines,
         "unknown_names": unknown_lines, "names_checked": found.names_checked},
        [*problem_lines, *unknown_lines],
        f"{len(load.tasks)} tasks loaded ({found.variants} variants), {len(problem_lines)} "
        f"structural problem(s), {len(unknown_lines)} unknown metric/getter/setup-step name(s)",
        as_json=as_json):
        raise SystemExit(1)


def report_validation(result: dict[str, Any], lines: list[str], summary: str, *,
                      as_json: bool) -> bool:
    """Print what a `validate` found: the result as JSON or one line per finding on
    stdout, the summary (and, without the evaluation extra, the hint that names
    went unchecked) on stderr. True when there was a finding (the command exits 1)."""
    if as_json:
        emit_json(result)
    else:
        for line in lines:
            click.echo(line)
    click.echo(summary, err=True)
    if not result["names_checked"]:
        click.echo(NAMES_UNCHECKED, err=True)
    return bool(lines)


@tasks.command("check")
@click.option("--osworld", "osworld", required=True,
              type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="OSWorld checkout (or its evaluation_examples).")
@click.option("--provider", type=click.Choice(PROVIDERS), default="local", show_default=True)
@click.option("--cache", "cache_dir", type=click.Path(file_okay=False, path_type=Path),
              default=None, help="Asset cache root [default: $CUA_RL_CACHE_DIR or "
              "~/.cache/cua-rl/files].")
@click.option("--split", default=None, help="Check only this split's tasks.")
@click.option("--write-split", "split_out", type=click.Path(dir_okay=False, path_type=Path),
              default=Path("runnable.txt"), show_default=True,
              help="Where to write the runnable task ids (a split file).")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON summary only.")
@click.option("--on-desktop", is_flag=True,
              help="Also run the setup of every runnable task on local desktops and report "
              "setups that fail or leave a blank first screen.")
@click.option("--desktops", type=click.IntRange(1, 8), default=1, show_default=True,
              help="Local desktops for --on-desktop.")
@click.option("--sample", type=click.IntRange(1), default=None,
              help="With --on-desktop: only a stratified sample of this many tasks at most "
              "(every domain and setup-step kind).")
@click.option("--noop-agent", "--noop", "noop", is_flag=True,
              help="With --on-desktop: also score the untouched desktop for a no-op agent, "
              "once declaring success (must score 0 on every task) and once failure (must "
              "score 1 on exactly the infeasible ones); offenders by task id in the JSON. "
              "Exits with status 1 when there is an offender.")
def check_tasks(osworld: Path, provider: str, cache_dir: Path | None, split: str | None,
                split_out: Path, as_json: bool, on_desktop: bool, desktops: int,
                sample: int | None, noop: bool) -> None:
    """Per task: what it needs (assets uncached, apps missing, credentials, root,
    the internet) and whether it can run on PROVIDER's desktops here."""
    from cua_rl.tasks.preflight import capabilities_for, describe, preflight
    from cua_rl.tasks.runnable import check_on_desktop, write_split

    load = _load(f"osworld:{osworld}", split)
    cache = FileCache(cache_dir or default_cache_root())
    result = preflight(load.tasks, capabilities_for(provider), cache, load.unimplemented)
    write_split(split_out, result.runnable,
                f"Tasks of {osworld} runnable on the {provider} provider "
                f"(cua-rl tasks check, cache {cache.root}).")
    summary = result.summary()
    if on_desktop:
        if provider != "local":
            raise click.UsageError("--on-desktop runs local desktops: use --provider local")
        summary["on_desktop"] = check_on_desktop(
            [t for t in load.tasks if t.task_id in set(result.runnable)], cache, desktops,
            sample, noop, on_outcome=None if as_json else _echo_outcome)
    offenders = summary.get("on_desktop", {}).get("noop_agent", {}).get("offenders", {})
    if as_json:
        emit_json(summary)
        _exit_on_offenders(offenders)
        return
    for task in load.tasks:
        state = result.details.get(task.task_id, "runnable")
        click.echo(f"{task.task_id}  {task.domain}  {state}  "
                   f"{describe(result.needs[task.task_id])}")
    counts = ", ".join(f"{r} {len(ids)}" for r, ids in result.not_runnable.items())
    click.echo(f"{len(result.runnable)} of {result.total} runnable on {provider}"
               + (f"; not runnable: {counts}" if counts else "")
               + f"; split written to {split_out}", err=True)
    _exit_on_offenders(offenders)


def _echo_outcome(outcome: Any) -> None:
    """One line per task whose setup ran (`cua_rl.tasks.setup_check.SetupOutcome`)."""
    state = ("ok" if outcome.ok else f"setup failed: {outcome.error}" if outcome.error
             else "blank first screen")
    noop = outcome.noop
    scored = "" if noop is None else "  no-op agent: " + (
        f"apart, the expected file is a downloaded stand-in: {noop.apart_reason}"
        if noop.standin_apart else noop.wrong or "right")
    click.echo(f"{outcome.task_id}  {outcome.domain}  on desktop: {state}  "
               f"({outcome.seconds:.1f} s){scored}")


def _exit_on_offenders(offenders: dict[str, str]) -> None:
    """A no-op agent check with offenders fails the command, so scripts and CI notice."""
    if offenders:
        click.echo(f"no-op agent check: {len(offenders)} offender(s): "
                   + ", ".join(sorted(offenders)), err=True)
        raise SystemExit(1)


@tasks.command("verify")
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
    from cua_rl.tasks.verify import Ledger
    from cua_rl.tasks.verify_run import plan_run, run_plan, write_report

    try:
        load = load_source(f"osworld:{osworld}", split)
        ledger = Ledger(out_dir, fresh=fresh)
    except TaskFormatError as exc:
        raise click.ClickException(str(exc)) from exc
    chosen = load.tasks
    if task_ids:
        unknown = sorted(set(task_ids) - {t.task_id for t in chosen})
        if unknown:
            raise click.BadParameter(f"not in {osworld}: {', '.join(unknown)}",
                                     param_hint="--task")
        chosen = [t for t in chosen if t.task_id in set(task_ids)]
    cache = FileCache(cache_dir or default_cache_root())
    try:
        todo, plan = plan_run(chosen, load.unimplemented, ledger, cache, golden_root,
                              real_assets)
    except TaskFormatError as exc:
        raise click.ClickException(str(exc)) from exc
    if not as_json:
        click.echo(f"verify: {len(chosen)} task(s), {len(chosen) - len(todo)} already settled "
                   f"in {ledger.path}, {len(plan.pending)} to run on {desktops} desktop(s)",
                   err=True)
    began = time.monotonic()
    run_plan(plan, ledger, desktops, cache.root,
             on_progress=None if as_json else lambda line: click.echo(line, err=True))
    summary, verdicts = write_report(chosen, ledger, out_dir, time.monotonic() - began)
    if as_json:
        emit_json(summary)
        return
    for verdict in sorted(verdicts, key=lambda v: (v.domain, v.task_id)):
        if verdict.status in ("fail_golden", "fail_untouched", "error") or not verdict.ok:
            click.echo(verdict.line())
    click.echo(f"verify: {summary['passed']}/{summary['attempted']} attempted pass, "
               f"statuses {json.dumps(summary['statuses'])}; report {out_dir / 'verify.md'}",
               err=True)


@tasks.command("coverage")
@click.option("--osworld", "checkout", type=click.Path(exists=True, path_type=Path),
              help="An OSWorld checkout (or its evaluation_examples folder).")
@click.option("--source", help="Instead of --osworld: osworld:PATH or local.")
@click.option("--split", help="A shipped split name or a split file.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def coverage_command(checkout: Path | None, source: str | None, split: str | None,
                     as_json: bool) -> None:
    """How many tasks have every evaluator name implemented, per domain."""
    from cua_rl.tasks.coverage import coverage

    if (checkout is None) == (source is None):
        raise click.UsageError("give exactly one of --osworld PATH or --source")
    try:
        data = coverage(source or f"osworld:{checkout}", split)
    except TaskFormatError as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        emit_json(data)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table("domain", "resolved", "total", title="evaluator coverage")
    for domain, row in data["per_domain"].items():
        table.add_row(domain, str(row["resolved"]), str(row["total"]))
    table.add_row("all", str(data["resolved"]), str(data["total"]), style="bold")
    Console().print(table)
    for name, count in data["missing"].items():
        click.echo(f"missing: {name} ({count} tasks)")
