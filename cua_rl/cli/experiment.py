"""`cua-rl experiment FILE`: arms x seeds from one file, resumable, with Table 1's
layout and the learning curves as outputs (cua_rl/experiment/, docs/experiments.md)."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("experiment")
@click.argument("file", type=click.Path(path_type=Path))
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="The experiment's folder (default: runs/experiments/<name>); a rerun "
    "with the same folder continues: finished cells are not run again.",
)
@click.option(
    "--list",
    "list_only",
    is_flag=True,
    help="Print the cells, their steps and state (pending, partial, done); run nothing.",
)
@click.option(
    "--report",
    "report_only",
    is_flag=True,
    help="Write table.json, table.md and curves.png from the cells done so far; run nothing.",
)
@click.option(
    "--runner",
    metavar="MODULE:ATTR",
    default=None,
    help="Another cell runner (a class taking a progress callback); default: "
    "each step as a cua-rl command. The test suite's stub uses it.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def experiment(
    file: Path,
    out: Path | None,
    list_only: bool,
    report_only: bool,
    runner: str | None,
    as_json: bool,
) -> None:
    """Run every arm of FILE at every seed, one cell after another (each an ordinary
    train run directory), evaluating the policy (and reward model) at the file's
    versions; then write table.json, table.md and curves.png. Stopped (SIGTERM,
    Ctrl-C), it exits 1; the same command continues where it stopped."""
    from cua_rl.command_output import emit_json
    from cua_rl.experiment.grid import (
        listing,
        load_runner,
        open_grid,
        render_listing,
        run_experiment,
        write_outputs,
    )

    grid = open_grid(file, out)
    if list_only:
        listed = listing(grid)
        emit_json(listed) if as_json else click.echo(render_listing(listed))
        return
    if report_only:
        result = write_outputs(grid)
    else:

        def progress(line: str) -> None:
            click.echo(line, err=True)

        result = run_experiment(grid, load_runner(runner, progress), progress)
    if as_json:
        emit_json(result)
    else:
        click.echo("  ".join(f"{k}={v}" for k, v in result.items()))
