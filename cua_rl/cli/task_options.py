"""What the `cua-rl tasks ...` commands (cli/tasks.py) share, and `templates validate`
with them: the --source/--osworld/--split/--root options, loading the tasks they name
(a malformed source is one line, not a traceback) and printing problems and
validation findings.

It is apart from cli/tasks.py, which holds the commands themselves: the options and
the printing are one contract every task command keeps alike, and `templates
validate` reports its findings as `tasks validate` does without importing the task
commands.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from cua_rl.command_output import emit_json
from cua_rl.errors import TaskFormatError
from cua_rl.tasks.osworld import TaskLoad
from cua_rl.tasks.sources import SOURCE_FORMS, load_source, templates_root_of
from cua_rl.tasks.validation import NAMES_UNCHECKED


def load_tasks(source: str, split: str | None) -> TaskLoad:
    """Tasks of `--source`/`--osworld`, restricted to `--split` when given."""
    try:
        return load_source(source, split)
    except TaskFormatError as exc:
        raise click.ClickException(str(exc)) from exc


def report_problems(load: TaskLoad, lines: list[str] | None = None) -> None:
    """Problem lines to stdout (or into `lines`, for --json), the count to stderr."""
    for problem in load.problems:
        if lines is None:
            click.echo(str(problem))
        else:
            lines.append(str(problem))
    if load.problems:
        click.echo(f"{len(load.problems)} problem(s); those task files are skipped", err=True)


def source_options(command: Callable[..., None]) -> Callable[..., None]:
    """The options every `tasks` subcommand shares: --source or --osworld, --split
    and --root (the same names `train`, `eval` and `templates` use; the old
    `--templates-root` still works, hidden). The command receives `source` and
    `templates_root` (a `pairs:DIR` source's own root unless --root is given)."""

    @functools.wraps(command)
    def wrapped(
        *args: Any,
        source: str | None,
        osworld: Path | None,
        root: Path | None,
        old_root: Path | None,
        **kwargs: Any,
    ) -> Any:
        if osworld is not None and source is not None:
            raise click.UsageError("give --source or --osworld, not both")
        kwargs["source"] = f"osworld:{osworld}" if osworld is not None else source or "local"
        kwargs["templates_root"] = templates_root_of(kwargs["source"], root or old_root)
        return command(*args, **kwargs)

    for option in reversed(
        [
            click.option(
                "--source",
                help=f"Where tasks come from: {SOURCE_FORMS} [default: local].",
                default=None,
            ),
            click.option(
                "--osworld",
                type=click.Path(file_okay=False, path_type=Path),
                help="An OSWorld checkout (or its evaluation_examples): the same as "
                "--source osworld:PATH.",
            ),
            click.option("--split", help="A shipped split name or a .txt/.json split file."),
            click.option(
                "--root",
                type=click.Path(file_okay=False, path_type=Path),
                help="Folder with templates/ and evaluators/ (task variants) [default: "
                "this project's; a pairs:DIR source always reads DIR].",
            ),
            click.option(
                "--templates-root",
                "old_root",
                hidden=True,
                type=click.Path(file_okay=False, path_type=Path),
            ),
        ]
    ):
        wrapped = option(wrapped)
    return wrapped


def report_validation(
    result: dict[str, Any], lines: list[str], summary: str, *, as_json: bool
) -> bool:
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
