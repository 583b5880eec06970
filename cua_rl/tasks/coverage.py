"""Evaluator coverage: how many tasks have every getter, metric and setup step
they use implemented, per domain. This is what decides whether scores on a task
set are comparable with published OSWorld numbers."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import click

from cua_rl.command_output import emit_json
from cua_rl.errors import TaskFormatError
from cua_rl.tasks.sources import load_source


def coverage(source: str, split: str | None = None) -> dict[str, Any]:
    """`total`, `resolved`, `per_domain` {domain: {total, resolved}}, `missing`
    {name: number of tasks using it}."""
    load = load_source(source, split)
    per_domain: dict[str, dict[str, int]] = {}
    missing: Counter[str] = Counter()
    for task in load.tasks:
        row = per_domain.setdefault(task.domain, {"total": 0, "resolved": 0})
        row["total"] += 1
        names = load.unimplemented.get(task.task_id, [])
        if names:
            missing.update(set(names))
        else:
            row["resolved"] += 1
    return {
        "total": len(load.tasks),
        "resolved": sum(r["resolved"] for r in per_domain.values()),
        "per_domain": dict(sorted(per_domain.items())),
        "missing": dict(missing.most_common()),
        "malformed": len(load.problems),
    }


@click.command("coverage")
@click.option("--osworld", "checkout", type=click.Path(exists=True, path_type=Path),
              help="An OSWorld checkout (or its evaluation_examples folder).")
@click.option("--source", help="Instead of --osworld: osworld:PATH or local.")
@click.option("--split", help="A shipped split name or a split file.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def coverage_command(checkout: Path | None, source: str | None, split: str | None,
                     as_json: bool) -> None:
    """How many tasks have every evaluator name implemented, per domain."""
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
