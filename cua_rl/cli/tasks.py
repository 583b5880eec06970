"""`cua-rl tasks ...`: list, show and check task files.

Problem lines go to stdout as `file: $.json.path: what was expected`, one per
problem, so they can be grepped and fixed one by one; a summary goes to stderr.
The exit status is 1 when any problem was found. `tasks check` prints one line
per task (`id  domain  runnable | reason: detail`), or with --json the summary
`{"total", "runnable", "not_runnable": {reason: [ids]}}`; with `--write-split FILE`
it also writes the runnable ids as a split file that `--split` accepts (nothing is
written unasked). What is checked lives in
`cua_rl.tasks` (validation, preflight, runnable, verify_run, coverage); this
module parses the flags and prints.

The options and printing every `tasks` command shares are in task_options.py.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from cua_rl.cli.task_options import load_tasks, report_problems, report_validation, source_options
from cua_rl.cli.tasks_verify import parity_tasks, verify_tasks
from cua_rl.command_output import emit_json
from cua_rl.desktop.file_cache import FileCache, default_cache_root
from cua_rl.errors import TaskFormatError
from cua_rl.tasks.pairs import load_variants
from cua_rl.tasks.runnable import PROVIDERS
from cua_rl.tasks.validation import validate_load


@click.group()
def tasks() -> None:
    """List, show and check task files (OSWorld checkout or the local suite)."""


@tasks.command("list")
@source_options
@click.option(
    "--json", "as_json", is_flag=True, help="Objects with id, domain, instruction, variants."
)
def list_tasks(source: str, split: str | None, templates_root: Path, as_json: bool) -> None:
    """Print one task id per line."""
    load = load_tasks(source, split)
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
    report_problems(load, [] if as_json else None)
    if load.problems:
        raise SystemExit(1)


@tasks.command("show")
@click.argument("task_id")
@source_options
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Accepted for uniformity: the task is always printed as JSON.",
)
def show_task(
    task_id: str, source: str, split: str | None, templates_root: Path, as_json: bool
) -> None:
    """Print one task and its variants as JSON."""
    load = load_tasks(source, split)
    task = next((t for t in load.tasks if t.task_id == task_id), None)
    if task is None:
        report_problems(load)
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
@source_options
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print {tasks, variants, problems, unknown_names, names_checked} only.",
)
def validate_tasks(source: str, split: str | None, templates_root: Path, as_json: bool) -> None:
    """Report malformed tasks and unknown metric/getter/setup-step names (exit 1)."""
    load = load_tasks(source, split)
    problem_lines: list[str] = []
    report_problems(load, problem_lines)
    found = validate_load(load, templates_root)
    problem_lines += found.problems
    unknown_lines = found.unknown_names
    if report_validation(
        {
            "tasks": len(load.tasks),
            "variants": found.variants,
            "problems": problem_lines,
            "unknown_names": unknown_lines,
            "names_checked": found.names_checked,
        },
        [*problem_lines, *unknown_lines],
        f"{len(load.tasks)} tasks loaded ({found.variants} variants), {len(problem_lines)} "
        f"structural problem(s), {len(unknown_lines)} unknown metric/getter/setup-step name(s)",
        as_json=as_json,
    ):
        raise SystemExit(1)


@tasks.command("check")
@click.option(
    "--osworld",
    "osworld",
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="OSWorld checkout (or its evaluation_examples).",
)
@click.option("--provider", type=click.Choice(PROVIDERS), default="local", show_default=True)
@click.option(
    "--cache",
    "cache_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Asset cache root [default: $CUA_RL_CACHE_DIR or ~/.cache/cua-rl/files].",
)
@click.option("--split", default=None, help="Check only this split's tasks.")
@click.option(
    "--write-split",
    "split_out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the runnable task ids to this split file (usable with "
    "--split); without it nothing is written.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the JSON summary only.")
@click.option(
    "--on-desktop",
    is_flag=True,
    help="Also run the setup of every runnable task on local desktops and report "
    "setups that fail or leave a blank first screen.",
)
@click.option(
    "--desktops",
    type=click.IntRange(1, 8),
    default=1,
    show_default=True,
    help="Local desktops for --on-desktop.",
)
@click.option(
    "--sample",
    type=click.IntRange(1),
    default=None,
    help="With --on-desktop: only a stratified sample of this many tasks at most "
    "(every domain and setup-step kind).",
)
@click.option(
    "--noop-agent",
    "--noop",
    "noop",
    is_flag=True,
    help="With --on-desktop: also score the untouched desktop for a no-op agent, "
    "once declaring success (must score 0 on every task) and once failure (must "
    "score 1 on exactly the infeasible ones); offenders by task id in the JSON. "
    "Exits with status 1 when there is an offender.",
)
def check_tasks(
    osworld: Path,
    provider: str,
    cache_dir: Path | None,
    split: str | None,
    split_out: Path | None,
    as_json: bool,
    on_desktop: bool,
    desktops: int,
    sample: int | None,
    noop: bool,
) -> None:
    """Per task: what it needs (assets uncached, apps missing, credentials, root,
    the internet) and whether it can run on PROVIDER's desktops here."""
    from cua_rl.tasks.preflight import capabilities_for, describe, preflight
    from cua_rl.tasks.runnable import check_on_desktop, write_split

    load = load_tasks(f"osworld:{osworld}", split)
    cache = FileCache(cache_dir or default_cache_root())
    result = preflight(load.tasks, capabilities_for(provider), cache, load.unimplemented)
    if split_out is not None:
        write_split(
            split_out,
            result.runnable,
            f"Tasks of {osworld} runnable on the {provider} provider "
            f"(cua-rl tasks check, cache {cache.root}).",
        )
    summary = result.summary()
    if on_desktop:
        if provider != "local":
            raise click.UsageError("--on-desktop runs local desktops: use --provider local")
        summary["on_desktop"] = check_on_desktop(
            [t for t in load.tasks if t.task_id in set(result.runnable)],
            cache,
            desktops,
            sample,
            noop,
            on_outcome=None if as_json else _echo_outcome,
        )
    offenders = summary.get("on_desktop", {}).get("noop_agent", {}).get("offenders", {})
    if as_json:
        emit_json(summary)
        _exit_on_offenders(offenders)
        return
    for task in load.tasks:
        state = result.details.get(task.task_id, "runnable")
        click.echo(
            f"{task.task_id}  {task.domain}  {state}  {describe(result.needs[task.task_id])}"
        )
    counts = ", ".join(f"{r} {len(ids)}" for r, ids in result.not_runnable.items())
    click.echo(
        f"{len(result.runnable)} of {result.total} runnable on {provider}"
        + (f"; not runnable: {counts}" if counts else "")
        + (f"; split written to {split_out}" if split_out is not None else ""),
        err=True,
    )
    _exit_on_offenders(offenders)


def _echo_outcome(outcome: Any) -> None:
    """One line per task whose setup ran (`cua_rl.tasks.setup_check.SetupOutcome`)."""
    state = (
        "ok"
        if outcome.ok
        else f"setup failed: {outcome.error}"
        if outcome.error
        else "blank first screen"
    )
    noop = outcome.noop
    scored = (
        ""
        if noop is None
        else "  no-op agent: "
        + (
            f"apart, the expected file is a downloaded stand-in: {noop.apart_reason}"
            if noop.standin_apart
            else noop.wrong or "right"
        )
    )
    click.echo(
        f"{outcome.task_id}  {outcome.domain}  on desktop: {state}  "
        f"({outcome.seconds:.1f} s){scored}"
    )


def _exit_on_offenders(offenders: dict[str, str]) -> None:
    """A no-op agent check with offenders fails the command, so scripts and CI notice."""
    if offenders:
        click.echo(
            f"no-op agent check: {len(offenders)} offender(s): " + ", ".join(sorted(offenders)),
            err=True,
        )
        raise SystemExit(1)


@tasks.command("coverage")
@click.option(
    "--osworld",
    "checkout",
    type=click.Path(exists=True, path_type=Path),
    help="An OSWorld checkout (or its evaluation_examples folder).",
)
@click.option("--source", help="Instead of --osworld: osworld:PATH or local.")
@click.option("--split", help="A shipped split name or a split file.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def coverage_command(
    checkout: Path | None, source: str | None, split: str | None, as_json: bool
) -> None:
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


tasks.add_command(verify_tasks)
tasks.add_command(parity_tasks)
