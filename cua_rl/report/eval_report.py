"""The OSWorld evaluation report: per task, per domain, OSWorld's app groups, overall.

A task run is one trajectory whose group id is `<task_id>#<run_index>` and whose
status is finished or step_limit; aborted attempts never count (docs/architecture.md,
failure rules). Scores are the evaluator's raw scores, so partial credit and
infeasible tasks count exactly as `evaluate()` says. Every mean is over tasks
(each task first averaged over its runs), as OSWorld reports success rates.

Truthful counts: every scope (task set, group, domain) says how many of its
tasks were attempted, scored, failed their setup (`setup_failed`: recorded
with its reason, never a 0) and are unsupported by the provider, and gives the
success rate both over the scored tasks (`mean`) and over all its tasks
(`rate_all`, where any task without a score counts as 0: OSWorld's figure),
each with its denominator and a 95 % interval, and the report gives pass@k and
pass^k for k up to the runs (`eval_stats`). A task with no scored run yet is
listed as incomplete. The files are written by `eval_output`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from statistics import fmean
from typing import Any

from cua_rl.report.eval_stats import pass_k_table, scope_intervals, statistics_note
from cua_rl.store.run_store import RunStore

TASK_RUN_SEP = "#"
SCORED_STATUSES = ("finished", "step_limit")
SETUP_FAILED = "setup_failed"

GROUPS: dict[str, tuple[str, ...]] = {
    "OS": ("os",),
    "Office": ("libreoffice_calc", "libreoffice_impress", "libreoffice_writer"),
    "Daily": ("vlc", "thunderbird", "chrome"),
    "Professional": ("gimp", "vs_code"),
    "Workflow": ("multi_apps",),
}
"""OSWorld's domain groups, as its leaderboard's columns report them; every
OSWorld domain belongs to exactly one."""


def task_run_id(task_id: str, run_index: int) -> str:
    """The group id of one task run: the key that makes an evaluation resumable."""
    return f"{task_id}{TASK_RUN_SEP}{run_index}"


def parse_task_run_id(group_id: str) -> tuple[str, int] | None:
    """(task id, run index) of an evaluation group id; None for any other group."""
    task_id, sep, index = group_id.rpartition(TASK_RUN_SEP)
    if not sep or not task_id or not index.isdigit():
        return None
    return task_id, int(index)


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One scored task run."""

    task_id: str
    run_index: int
    score: float
    status: str
    trajectory_id: str
    domain: str = ""
    steps: int = 0


def records_from_store(store: RunStore) -> list[RunRecord]:
    """Scored task runs in the store, oldest first (other trajectories are ignored)."""
    out = []
    for row in store.trajectory_records():
        key = parse_task_run_id(row["group_id"])
        if key is None or row["status"] not in SCORED_STATUSES or row["score"] is None:
            continue
        out.append(
            RunRecord(
                task_id=key[0],
                run_index=key[1],
                score=float(row["score"]),
                status=row["status"],
                trajectory_id=row["trajectory_id"],
                domain=row["domain"] or "",
                steps=row["n_steps"],
            )
        )
    return out


def setup_failures_from_store(store: RunStore) -> dict[str, str]:
    """Group id -> reason of every evaluation task run whose setup failed (the
    first reason recorded). A setup failure is permanent: the run is not retried."""
    out: dict[str, str] = {}
    for row in store.trajectory_records():
        if row["status"] == SETUP_FAILED and parse_task_run_id(row["group_id"]) is not None:
            out.setdefault(row["group_id"], row.get("error") or "setup failed")
    return out


def done_task_runs(records: Iterable[RunRecord], setup_failed: Iterable[str] = ()) -> set[str]:
    """Group ids of the task runs that need not run again (scored or setup-failed)."""
    return {task_run_id(r.task_id, r.run_index) for r in records} | set(setup_failed)


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The truthful counts of a scope's task rows (see the module docstring), and
    each rate's interval (`eval_stats.scope_intervals`)."""
    means = [row["mean"] for row in rows if row["mean"] is not None]
    count = lambda state: sum(row["state"] == state for row in rows)  # noqa: E731
    return {
        "mean": fmean(means) if means else None,
        "count": len(means),
        "tasks": len(rows),
        "attempted": len(means) + count(SETUP_FAILED),
        "scored": len(means),
        "setup_failed": count(SETUP_FAILED),
        "unsupported": count("unsupported"),
        "rate_all": sum(means) / len(rows) if rows else None,
        **scope_intervals(rows),
    }


def build_report(
    records: Iterable[RunRecord],
    tasks: Mapping[str, str] | None = None,
    runs: int | None = None,
    protocol: Mapping[str, Any] | None = None,
    *,
    setup_failed: Mapping[str, str] | None = None,
    unsupported: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The report as plain JSON data.

    `setup_failed` maps task-run group ids to the reason their setup failed;
    `unsupported` maps task ids to why the provider cannot run them (they were
    never attempted).

    `tasks` (task id -> domain) is the evaluated task set: it fixes the scope and
    order and names tasks that have no run yet; None takes the tasks of the
    records. Runs with an index >= `runs` are left out, and a run recorded twice
    keeps its first record, so the means always follow the stated protocol.
    """
    by_task: dict[str, dict[int, RunRecord]] = defaultdict(dict)
    for r in records:
        if runs is None or r.run_index < runs:
            by_task[r.task_id].setdefault(r.run_index, r)
    if tasks is None:
        tasks = {t: next(iter(rs.values())).domain for t, rs in by_task.items()}
    failed_by_task: dict[str, str] = {}
    for group_id, reason in (setup_failed or {}).items():
        key = parse_task_run_id(group_id)
        if key is not None and (runs is None or key[1] < runs):
            failed_by_task.setdefault(key[0], reason)
    unsupported = unsupported or {}
    task_rows: dict[str, dict[str, Any]] = {}
    incomplete: list[str] = []
    for task_id, domain in tasks.items():
        done = [by_task.get(task_id, {})[i] for i in sorted(by_task.get(task_id, {}))]
        scores = [r.score for r in done]
        mean = fmean(scores) if scores else None
        row: dict[str, Any] = {
            "domain": domain,
            "mean": mean,
            "scores": scores,
            "runs": [
                {
                    "run": r.run_index,
                    "score": r.score,
                    "status": r.status,
                    "steps": r.steps,
                    "trajectory_id": r.trajectory_id,
                }
                for r in done
            ],
        }
        if mean is not None:
            row["state"] = "scored"
        elif task_id in unsupported:
            row |= {"state": "unsupported", "reason": unsupported[task_id]}
        elif task_id in failed_by_task:
            row |= {"state": SETUP_FAILED, "reason": failed_by_task[task_id]}
        else:
            row["state"] = "not_run"
        task_rows[task_id] = row
        if mean is None:
            incomplete.append(task_id)
    in_domain = lambda ds: [r for r in task_rows.values() if r["domain"] in ds]  # noqa: E731
    domains = {d: _summary(in_domain({d})) for d in sorted({*tasks.values()})}
    groups = {
        name: {**_summary(in_domain(set(members))), "domains": list(members)}
        for name, members in GROUPS.items()
    }
    ungrouped = sorted({*tasks.values()} - {d for ms in GROUPS.values() for d in ms})
    if ungrouped:
        groups["Other"] = {**_summary(in_domain(set(ungrouped))), "domains": ungrouped}
    runs_done = sum(len(row["runs"]) for row in task_rows.values())
    return {
        "protocol": {**(protocol or {}), "runs": runs},
        "statistics": statistics_note(),
        "pass_k": pass_k_table(list(task_rows.values()), runs),
        "overall": {
            **_summary(list(task_rows.values())),
            "runs_done": runs_done,
            # unsupported tasks are never run: no run of theirs is missing
            "runs_expected": (len(tasks) - len(set(tasks) & set(unsupported))) * runs
            if runs is not None
            else None,
            "incomplete_tasks": incomplete,
        },
        "groups": groups,
        "domains": domains,
        "tasks": task_rows,
    }
