"""Reading a step's figures from what its command left: an evaluation rollout's
success per task, eval-prm's accuracies, a train run's summary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cua_rl.errors import RunFailed

SCORED = ("finished", "step_limit")
"""Trajectory statuses with a verified outcome (aborted and setup-failed have none)."""


def rollout_success(run_dir: Path) -> dict[str, Any]:
    """Success of an evaluation rollout: per task, the share of its scored trajectories
    whose evaluator score is > 0; overall, the mean over tasks (each task counts once,
    whatever its number of scored rollouts). RunFailed when nothing was scored."""
    from cua_rl.store.run_store import RunStore

    store = RunStore.read_only(run_dir)
    try:
        records = store.trajectory_records()
    finally:
        store.close()
    per_task: dict[str, list[float]] = {}
    lost = 0
    for row in records:
        if row["status"] not in SCORED or row["score"] is None:
            lost += 1
            continue
        per_task.setdefault(row["task_id"] or row["variant_id"], []).append(
            1.0 if row["score"] > 0 else 0.0
        )
    if not per_task:
        raise RunFailed(
            f"{run_dir}: no scored trajectory ({lost} aborted or failed); see "
            f"`cua-rl runs show {run_dir}`"
        )
    rates = [sum(s) / len(s) for s in per_task.values()]
    return {
        "success": sum(rates) / len(rates),
        "n": sum(len(s) for s in per_task.values()),
        "lost": lost,
        "tasks": {t: sum(s) / len(s) for t, s in per_task.items()},
        "run_dir": str(run_dir),
    }


def prm_accuracy(report: dict[str, Any], out_dir: Path) -> dict[str, Any]:
    """The overall figures of an eval-prm report (`--json` output)."""
    overall = report.get("overall") if isinstance(report, dict) else None
    if not isinstance(overall, dict):
        raise RunFailed(f'{out_dir}: eval-prm\'s report has no "overall" figures')
    keys = ("outcome_accuracy", "process_accuracy", "steps", "labelled", "trajectories")
    return {**{k: overall.get(k) for k in keys}, "out": str(out_dir)}


def json_output(text: str, what: str) -> Any:
    """The JSON document a `--json` command printed; RunFailed naming `what` otherwise."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise RunFailed(
            f"{what}: its --json output is not JSON ({exc}): {text.strip()[-200:]!r}"
        ) from None


def run_summary(run_dir: Path) -> dict[str, Any]:
    """`cua-rl runs show RUN_DIR --json` of a cell's train run."""
    from cua_rl.store.run_store import RunStore

    store = RunStore.read_only(run_dir)
    try:
        return json.loads(json.dumps(store.summary(), default=str))
    finally:
        store.close()
