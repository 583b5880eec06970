"""`cua-rl templates ...`: check, scaffold and import template/evaluator pairs.

Problem lines go to stdout, one per problem, a summary to stderr, and the exit
status is 1 when any problem was found; metric, getter and setup-step names
nobody registered are problems (with a "did you mean"). What is checked lives
in `cua_rl.tasks.validation`; this module parses the flags and prints.
"""

from __future__ import annotations

from pathlib import Path

import click

from cua_rl.cli.task_options import report_validation
from cua_rl.command_output import emit_json
from cua_rl.errors import TaskFormatError
from cua_rl.tasks.authoring import AuthoringRoot, authoring_groups, scaffold_pair
from cua_rl.tasks.sources import DATA_ROOT
from cua_rl.tasks.validation import NotAPairPath, pair_targets, validate_pairs


@click.group()
def templates() -> None:
    """Check and import template/evaluator pairs (templates/, evaluators/)."""


@templates.command("validate")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    help="Authoring folder with templates/, evaluators/, golden/, difficulty.json and "
    "optionally tasks/ (default: this project's; see docs/pair-authoring.md).",
)
@click.option(
    "--on-desktop",
    is_flag=True,
    help="Also run each variant's golden solution (score 1) and initial state (0).",
)
@click.option(
    "--desktops",
    default=1,
    show_default=True,
    type=click.IntRange(1, 8),
    help="Local desktops used by --on-desktop.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print {tasks, variants, problems, names_checked} only (not with --on-desktop).",
)
def validate_templates(
    paths: tuple[Path, ...], root: Path | None, on_desktop: bool, desktops: int, as_json: bool
) -> None:
    """Check template/evaluator pairs: shape, pairing, metric/getter/step names
    (with a "did you mean"), the rule and option keys each metric reads, golden
    solutions and difficulty entries.

    PATHS are template files, evaluator files or folders, folders holding
    templates/ and evaluators/, or task ids under --root; none means all pairs
    under --root (default: this project's templates/ and evaluators/).
    """
    if as_json and on_desktop:
        raise click.UsageError("--json is not available with --on-desktop")
    try:
        targets = pair_targets(paths, root)
    except NotAPairPath as exc:
        raise click.BadParameter(str(exc), param_hint="PATHS") from None
    if not targets and not on_desktop and not as_json:
        click.echo(f"nothing to check: no templates/ or evaluators/ under {root or DATA_ROOT}")
        return
    found = validate_pairs(targets)
    if report_validation(
        {
            "tasks": len(targets),
            "variants": found.variants,
            "problems": found.problems,
            "names_checked": found.names_checked,
        },
        found.problems,
        f"checked {len(targets)} task(s): {found.variants} valid variant(s), "
        f"{len(found.problems)} problem(s)",
        as_json=as_json,
    ):
        raise SystemExit(1)
    if on_desktop:
        _validate_on_desktop(targets if paths else None, AuthoringRoot.of(root), desktops)


def _validate_on_desktop(
    targets: list[tuple[Path, str]] | None, layout: AuthoringRoot, desktops: int
) -> None:
    """Golden solutions score 1 and initial states 0 for the tasks in scope (the
    project's local suite, or an authoring root's pairs and tasks), on local
    desktops; a wrong score names each metric and the values it compared."""
    from cua_rl.tasks.check_jobs import print_report
    from cua_rl.tasks.on_desktop import validate_on_desktop

    ids = None if targets is None else [task_id for _, task_id in targets]
    try:
        groups = authoring_groups(layout, ids)
    except TaskFormatError as exc:
        raise click.ClickException(str(exc)) from exc
    report = validate_on_desktop(groups, desktops, golden_root=layout.golden_root)
    print_report(report, click.echo)
    if report.failures:
        raise SystemExit(1)


@templates.command("new")
@click.argument("task_id")
@click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    help="Authoring folder to write into (default: this project's).",
)
@click.option(
    "--domain",
    default="os",
    show_default=True,
    help="Domain of a new base task (an existing task keeps its own).",
)
@click.option("--instruction", help="The variant's instruction (default: the task's, or a TODO).")
@click.option("--json", "as_json", is_flag=True, help="Print {written: [paths]}.")
def new_template(
    task_id: str, root: Path | None, domain: str, instruction: str | None, as_json: bool
) -> None:
    """Scaffold a pair for TASK_ID: template, evaluator, golden stub, difficulty entry
    (and a base task under tasks/ when TASK_ID is not a known task)."""
    try:
        written = scaffold_pair(root or DATA_ROOT, task_id, domain, instruction)
    except TaskFormatError as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        emit_json({"written": [str(p) for p in written]})
    for path in [] if as_json else written:
        click.echo(f"wrote {path}")
    where = f" --root {root}" if root else ""
    click.echo(
        f"next: edit them, then: cua-rl templates validate{where} {task_id} --on-desktop", err=True
    )


@templates.command("import-openagentrl")
@click.argument("source", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--out",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder to write templates/ and evaluators/ into.",
)
@click.option("--json", "as_json", is_flag=True, help="Print {tasks, variants, skipped, out}.")
def import_openagentrl_command(source: Path, out: Path, as_json: bool) -> None:
    """Convert the RLAnything release (new_examples or its parent) into pairs."""
    from cua_rl.tasks.openagentrl import import_openagentrl

    try:
        summary = import_openagentrl(source, out)
    except TaskFormatError as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        emit_json(
            {
                "tasks": summary.tasks,
                "variants": summary.variants,
                "skipped": summary.skipped,
                "out": str(out),
            }
        )
        return
    click.echo(
        f"wrote {summary.tasks} template file(s) and {summary.variants} evaluator "
        f"file(s) under {out} ({summary.skipped} task file(s) without a template "
        f"skipped); check them with: cua-rl templates validate --root {out}"
    )
