"""`cua-rl runs ...`: look at what a run directory holds."""

from __future__ import annotations

import json
from pathlib import Path

import click

from cua_rl.store.run_store import DB_NAME


@click.group()
def runs() -> None:
    """Inspect run directories."""


@runs.command("show")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def show(run_dir: Path, as_json: bool) -> None:
    """Counts, counters and success rates per task of RUN_DIR (read only: the store
    is never written, so it is safe on a live or damaged run)."""
    import sqlite3

    from cua_rl.store.run_store import RunStore, unreadable

    store = RunStore.read_only(run_dir)
    try:
        summary = store.summary()
    except sqlite3.DatabaseError as exc:
        raise unreadable(run_dir / DB_NAME, exc) from None
    finally:
        store.close()
    if as_json:
        click.echo(json.dumps(summary, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    console = Console()
    counts = Table(title=f"run {summary['run_id']}", show_header=False)
    for key, value in summary.items():
        if key not in ("run_id", "counters", "tasks"):
            counts.add_row(key, str(value))
    console.print(counts)
    if summary["tasks"]:
        tasks = Table("task variant", "trajectories", "success")
        for variant, row in summary["tasks"].items():
            tasks.add_row(variant, str(row["trajectories"]), f"{row['success_rate']:.0%}")
        console.print(tasks)
