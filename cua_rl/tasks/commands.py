"""`cua-rl tasks ...` and `cua-rl templates ...`: inspect and check task inputs.

Problem lines go to stdout as `file: $.json.path: what was expected`, one per
problem, so they can be grepped and fixed one by one; a summary goes to stderr.
The exit status is 1 when any problem was found. Metric, getter and setup-step
names nobody registered are problems for both `tasks validate` and `templates
validate` (one line per use, with a "did you mean"): a run refuses to start
with them (tasks/names.py), so validation must not pass them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import click

from cua_rl.command_output import emit_json
from cua_rl.errors import TaskFormatError
from cua_rl.tasks.authoring import (
    AuthoringRoot,
    authoring_groups,
    difficulty_problems,
    golden_problems,
    scaffold_pair,
)
from cua_rl.tasks.check_command import check_tasks
from cua_rl.tasks.names import variant_name_problems
from cua_rl.tasks.osworld import TaskLoad
from cua_rl.tasks.pairs import (
    check_pair,
    load_variants,
    pair_task_ids,
    read_template,
    template_path,
)
from cua_rl.tasks.schema import Problem
from cua_rl.tasks.sources import PROJECT_ROOT, SOURCE_FORMS, load_source, templates_root_of
from cua_rl.tasks.verify_command import verify_tasks

NAMES_UNCHECKED = (
    "note: metric/getter names were not checked (cua_rl.evaluation.registry is not available yet)"
)


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


tasks.add_command(check_tasks)
tasks.add_command(verify_tasks)


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
    variants = 0
    unknown_lines: list[str] = []
    for task in load.tasks:
        runnable = [task]
        if template_path(templates_root, task.task_id).is_file():
            found, checks = check_pair(templates_root, task.task_id, unimplemented_is_problem=False)
            problem_lines += [str(problem) for problem in checks.problems]
            runnable = [] if checks.problems else [
                replace(task, evaluator_name=name, instruction=instruction, evaluator=spec)
                for name, (instruction, spec) in found.items()]
            load.names_checked = load.names_checked and checks.deep
        variants += max(len(runnable), 1)
        unknown_lines += dict.fromkeys(line for variant in runnable
                                       for line in variant_name_problems(variant, templates_root))
    if as_json:
        emit_json({"tasks": len(load.tasks), "variants": variants, "problems": problem_lines,
                   "unknown_names": unknown_lines, "names_checked": load.names_checked})
    else:
        for line in (*problem_lines, *unknown_lines):
            click.echo(line)
    click.echo(
        f"{len(load.tasks)} tasks loaded ({variants} variants), {len(problem_lines)} structural "
        f"problem(s), {len(unknown_lines)} unknown metric/getter/setup-step name(s)",
        err=True,
    )
    if not load.names_checked:
        click.echo(NAMES_UNCHECKED, err=True)
    if problem_lines or unknown_lines:
        raise SystemExit(1)


@click.group()
def templates() -> None:
    """Check and import template/evaluator pairs (templates/, evaluators/)."""


def _targets(paths: tuple[Path, ...], root: Path | None) -> list[tuple[Path, str]]:
    """(root, task id) pairs named by the PATHS arguments (see `templates validate`)."""
    if not paths:
        base = root or PROJECT_ROOT
        return [(base, task_id) for task_id in pair_task_ids(base)]
    targets = []
    for path in paths:
        if path.is_file() and path.parent.name == "templates":
            targets.append((path.parent.parent, path.stem))
        elif path.is_file() and path.parent.parent.name == "evaluators":
            targets.append((path.parent.parent.parent, path.parent.name))
        elif path.is_dir() and path.parent.name == "evaluators":
            targets.append((path.parent.parent, path.name))
        elif (path / "templates").is_dir() or (path / "evaluators").is_dir():
            targets += [(path, task_id) for task_id in pair_task_ids(path)]
        elif root is not None and not path.exists():
            targets.append((root, str(path)))  # a bare task id under --root
        else:
            raise click.BadParameter(
                f"{path}: expected templates/<id>.json, evaluators/<id>[/<name>.json], a folder "
                "with templates/ or evaluators/, or (with --root) a task id",
                param_hint="PATHS",
            )
    return list(dict.fromkeys(targets))


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
@click.option("--desktops", default=1, show_default=True, type=click.IntRange(1, 8),
              help="Local desktops used by --on-desktop.")
@click.option("--json", "as_json", is_flag=True,
              help="Print {tasks, variants, problems, names_checked} only (not with "
              "--on-desktop).")
def validate_templates(
    paths: tuple[Path, ...], root: Path | None, on_desktop: bool, desktops: int,
    as_json: bool,
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
    targets = _targets(paths, root)
    if not targets and not on_desktop and not as_json:
        click.echo(f"nothing to check: no templates/ or evaluators/ under {root or PROJECT_ROOT}")
        return
    problems = variants = 0
    names_checked = True
    all_lines: list[str] = []
    for pair_root, task_id in targets:
        found, checks = check_pair(pair_root, task_id, unimplemented_is_problem=True)
        lines = [str(p) for p in checks.problems]
        if template_path(pair_root, task_id).is_file():
            lines += [str(p) for p in _authoring_problems(AuthoringRoot.of(pair_root), task_id)]
        all_lines += lines
        problems += len(lines)
        variants += len(found)
        names_checked = names_checked and checks.deep
    if as_json:
        emit_json({"tasks": len(targets), "variants": variants, "problems": all_lines,
                   "names_checked": names_checked})
    else:
        for line in all_lines:
            click.echo(line)
    click.echo(
        f"checked {len(targets)} task(s): {variants} valid variant(s), {problems} problem(s)",
        err=True,
    )
    if not names_checked:
        click.echo(NAMES_UNCHECKED, err=True)
    if problems:
        raise SystemExit(1)
    if on_desktop:
        _validate_on_desktop(targets if paths else None, AuthoringRoot.of(root), desktops)


def _authoring_problems(layout: AuthoringRoot, task_id: str) -> list[Problem]:
    """Golden file and difficulty entry of one pair (see tasks/authoring.py), where
    the root keeps them: a root of templates and evaluators only (an import of
    the RLAnything release) has its base tasks and goldens elsewhere."""
    names = list(read_template(template_path(layout.root, task_id))[0])
    problems = difficulty_problems(layout.difficulty, {task_id: names})
    if (layout.golden_root / "golden").is_dir():
        problems = golden_problems(layout, task_id, names) + problems
    return problems


def _validate_on_desktop(targets: list[tuple[Path, str]] | None, layout: AuthoringRoot,
                         desktops: int) -> None:
    """Golden solutions score 1 and initial states 0 for the tasks in scope (the
    project's local suite, or an authoring root's pairs and tasks), on local
    desktops; a wrong score names each metric and the values it compared."""
    from cua_rl.tasks.on_desktop import print_report, validate_on_desktop

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
@click.option("--root", type=click.Path(file_okay=False, path_type=Path),
              help="Authoring folder to write into (default: this project's).")
@click.option("--domain", default="os", show_default=True,
              help="Domain of a new base task (an existing task keeps its own).")
@click.option("--instruction", help="The variant's instruction (default: the task's, or a TODO).")
@click.option("--json", "as_json", is_flag=True, help="Print {written: [paths]}.")
def new_template(task_id: str, root: Path | None, domain: str, instruction: str | None,
                 as_json: bool) -> None:
    """Scaffold a pair for TASK_ID: template, evaluator, golden stub, difficulty entry
    (and a base task under tasks/ when TASK_ID is not a known task)."""
    try:
        written = scaffold_pair(root or PROJECT_ROOT, task_id, domain, instruction)
    except TaskFormatError as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        emit_json({"written": [str(p) for p in written]})
    for path in [] if as_json else written:
        click.echo(f"wrote {path}")
    where = f" --root {root}" if root else ""
    click.echo(f"next: edit them, then: cua-rl templates validate{where} {task_id} --on-desktop",
               err=True)


@templates.command("import-openagentrl")
@click.argument("source", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--out",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder to write templates/ and evaluators/ into.",
)
@click.option("--json", "as_json", is_flag=True,
              help="Print {tasks, variants, skipped, out}.")
def import_openagentrl_command(source: Path, out: Path, as_json: bool) -> None:
    """Convert the RLAnything release (new_examples or its parent) into pairs."""
    from cua_rl.tasks.openagentrl import import_openagentrl

    try:
        summary = import_openagentrl(source, out)
    except TaskFormatError as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        emit_json({"tasks": summary.tasks, "variants": summary.variants,
                   "skipped": summary.skipped, "out": str(out)})
        return
    click.echo(
        f"wrote {summary.tasks} template file(s) and {summary.variants} evaluator "
        f"file(s) under {out} ({summary.skipped} task file(s) without a template "
        f"skipped); check them with: cua-rl templates validate --root {out}"
    )


from cua_rl.tasks.coverage import coverage_command  # noqa: E402

tasks.add_command(coverage_command)
