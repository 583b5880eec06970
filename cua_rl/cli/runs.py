"""`cua-rl runs ...`: look at what a run directory holds (`show`), and compare two
evaluations (`compare`, in `cua_rl.report.compare`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from cua_rl.command_output import emit_json
from cua_rl.store.run_store import DB_NAME


@click.group()
def runs() -> None:
    """Inspect run directories and compare evaluations."""


@runs.command("show")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def show(run_dir: Path, as_json: bool) -> None:
    """What RUN_DIR is (train/rollout/eval, finished or not, wall time), its counts,
    the opt-in training switches it had on (off in the paper's preset), mean evaluator
    score and success per policy version and per task, and why work was lost
    (aborts, give-ups, reward-model and setup failures, by reason with examples).
    `steps`/`verdicts` count good work only; `aborted_*` keys count the rest. Read
    only: the store is never written, so it is safe on a live or damaged run."""
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
        emit_json(summary)
        return
    print_summary(summary)


NESTED = ("run_id", "counters", "tasks", "reasons", "set_aside", "versions", "switches")
"""Summary keys printed as their own tables, not as `key value` rows."""


def print_summary(summary: dict[str, Any]) -> None:
    """The human form of `runs show`: the run, its counts, rewards per policy
    version, success per task variant, and why work was lost (by reason)."""
    from rich.console import Console
    from rich.table import Table

    console = Console(emoji=False)
    state = {True: "finished", None: "end not recorded"}.get(
        summary["finished"], summary.get("end") or "not finished"
    )
    title = f"{summary['kind']} run {summary['run_id']} ({state})"
    counts = Table(title=title, show_header=False)
    for key, value in summary.items():
        if key not in NESTED:
            counts.add_row(key, "" if value is None else str(value))
    console.print(counts)
    switches = summary.get("switches") or {}
    console.print(
        "switches away from the paper: "
        + (", ".join(f"{k}={v}" for k, v in switches.items()) or "none"),
        markup=False,
        soft_wrap=True,
    )
    if summary["versions"]:
        versions = Table("policy version", "trajectories", "mean score", "success")
        for row in summary["versions"]:
            score = "" if row["mean_score"] is None else f"{row['mean_score']:.3f}"
            versions.add_row(
                str(row["policy_version"]),
                str(row["trajectories"]),
                score,
                f"{row['success_rate']:.0%}",
            )
        console.print(versions)
    if summary["tasks"]:
        tasks = Table("task variant", "trajectories", "success")
        for variant, row in summary["tasks"].items():
            tasks.add_row(variant, str(row["trajectories"]), f"{row['success_rate']:.0%}")
        console.print(tasks)
    for variant, reason in summary["set_aside"].items():
        console.print(f"set aside: {variant}: {reason}", markup=False)
    lost = Table("lost work", "count", "reason", "example", title="why work was lost")
    for what, reasons in summary["reasons"].items():
        for reason, entry in reasons.items():
            example = entry["examples"][0]
            lost.add_row(
                what,
                str(entry["count"]),
                reason,
                f"{example['subject']}: {example['message']}"[:200],
            )
    if lost.row_count:
        console.print(lost)


@runs.command("compare")
@click.argument("a", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("b", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@click.option(
    "--png",
    "png",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also draw B - A per domain and overall, with 95 % intervals, as a PNG.",
)
def compare(a: Path, b: Path, as_json: bool, png: Path | None) -> None:
    """Whether evaluation B differs from evaluation A beyond noise. Each side is a
    `cua-rl eval` run directory or an OSWorld results folder (ours, or anyone's
    published one). First what differs in what ran beyond the model (from the
    manifests), then the paired difference over the tasks both scored with its
    bootstrap interval, the tasks that flipped either way, and McNemar's exact test
    with one plain sentence (docs/evaluate-your-model.md)."""
    from cua_rl.report.compare import compare as compare_sides
    from cua_rl.report.compare import render_lines
    from cua_rl.report.compare_sides import load_side

    result = compare_sides(load_side(a), load_side(b))
    if png is not None:
        from cua_rl.report.compare_plot import plot_comparison

        plot_comparison(result, png)
    if as_json:
        emit_json({**result.as_dict(), "png": str(png) if png else None})
        return
    click.echo("\n".join(render_lines(result)))
