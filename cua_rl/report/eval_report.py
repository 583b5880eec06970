"""The OSWorld evaluation report: per task, per domain, OSWorld's app groups, overall.

A task run is one trajectory whose group id is `<task_id>#<run_index>` and whose
status is finished or step_limit; aborted attempts never count (DESIGN.md
section 9). Scores are the evaluator's raw scores, so partial credit and
infeasible tasks count exactly as `evaluate()` says. Every mean is over tasks
(each task first averaged over its runs), as OSWorld reports success rates; a
task with no scored run yet is listed as incomplete and left out of the means
rather than counted as a failure.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean
from typing import Any

from cua_rl.store.run_store import RunStore

TASK_RUN_SEP = "#"
SCORED_STATUSES = ("finished", "step_limit")

GROUPS: dict[str, tuple[str, ...]] = {
    "Office": ("libreoffice_calc", "libreoffice_impress", "libreoffice_writer"),
    "Daily": ("vlc", "thunderbird", "chrome"),
    "Professional": ("gimp", "vs_code"),
}
"""OSWorld's domain groups, as its leaderboard reports them."""

REPORT_FILES = ("report.json", "report.md", "report.png")


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
        out.append(RunRecord(task_id=key[0], run_index=key[1], score=float(row["score"]),
                             status=row["status"], trajectory_id=row["trajectory_id"],
                             domain=row["domain"] or "", steps=row["n_steps"]))
    return out


def done_task_runs(records: Iterable[RunRecord]) -> set[str]:
    """Group ids of the task runs that need not run again."""
    return {task_run_id(r.task_id, r.run_index) for r in records}


def _summary(means: list[float]) -> dict[str, Any]:
    return {"mean": fmean(means) if means else None, "count": len(means)}


def build_report(
    records: Iterable[RunRecord],
    tasks: Mapping[str, str] | None = None,
    runs: int | None = None,
    protocol: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The report as plain JSON data.

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
    task_rows: dict[str, dict[str, Any]] = {}
    domain_means: dict[str, list[float]] = defaultdict(list)
    incomplete: list[str] = []
    for task_id, domain in tasks.items():
        done = [by_task.get(task_id, {})[i] for i in sorted(by_task.get(task_id, {}))]
        scores = [r.score for r in done]
        mean = fmean(scores) if scores else None
        task_rows[task_id] = {
            "domain": domain, "mean": mean, "scores": scores,
            "runs": [{"run": r.run_index, "score": r.score, "status": r.status,
                      "steps": r.steps, "trajectory_id": r.trajectory_id} for r in done],
        }
        if mean is None:
            incomplete.append(task_id)
        else:
            domain_means[domain].append(mean)
    domains = {d: _summary(domain_means[d]) for d in sorted({*tasks.values()})}
    groups = {
        name: {**_summary([m for d in members for m in domain_means.get(d, [])]),
               "domains": list(members)}
        for name, members in GROUPS.items()
    }
    all_means = [m for ms in domain_means.values() for m in ms]
    runs_done = sum(len(row["runs"]) for row in task_rows.values())
    return {
        "protocol": {**(protocol or {}), "runs": runs},
        "overall": {**_summary(all_means), "tasks": len(tasks), "runs_done": runs_done,
                    "runs_expected": len(tasks) * runs if runs is not None else None,
                    "incomplete_tasks": incomplete},
        "groups": groups,
        "domains": domains,
        "tasks": task_rows,
    }


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def render_markdown(report: Mapping[str, Any], title: str = "OSWorld evaluation") -> str:
    """Overall and groups first, then one table per domain (a task per row)."""
    overall, proto = report["overall"], report["protocol"]
    lines = [f"# {title}", ""]
    shown = [f"{k} {v}" for k, v in proto.items() if v is not None]
    if shown:
        lines += ["Protocol: " + ", ".join(shown) + ".", ""]
    expected = overall["runs_expected"]
    lines += [f"Task runs scored: {overall['runs_done']}"
              + (f" of {expected}" if expected is not None else "") + ".", ""]
    lines += ["## Overall and groups", "", "| scope | tasks | success rate |",
              "| --- | ---: | ---: |",
              f"| **Overall** | {overall['count']} | **{_pct(overall['mean'])}** |"]
    for name, group in report["groups"].items():
        members = " + ".join(group["domains"])
        lines.append(f"| {name} ({members}) | {group['count']} | {_pct(group['mean'])} |")
    lines += ["", "## Domains", "", "| domain | tasks | success rate |", "| --- | ---: | ---: |"]
    for domain, row in report["domains"].items():
        lines.append(f"| {domain} | {row['count']} | {_pct(row['mean'])} |")
    for domain in report["domains"]:
        lines += ["", f"### {domain}", "", "| task | mean | run scores |", "| --- | ---: | --- |"]
        for task_id, row in report["tasks"].items():
            if row["domain"] == domain:
                scores = ", ".join(f"{s:g}" for s in row["scores"]) or "(no run yet)"
                lines.append(f"| {task_id} | {_pct(row['mean'])} | {scores} |")
    if overall["incomplete_tasks"]:
        lines += ["", "Tasks without a scored run (left out of the means): "
                  + ", ".join(overall["incomplete_tasks"]) + "."]
    return "\n".join(lines) + "\n"


def chart_values(report: Mapping[str, Any]) -> dict[str, float]:
    """Success rate in percent per domain, then per group, then overall (bars
    with no scored task are left out)."""
    values = {d: row["mean"] for d, row in report["domains"].items()}
    values |= {name: g["mean"] for name, g in report["groups"].items()}
    values["Overall"] = report["overall"]["mean"]
    return {k: 100 * v for k, v in values.items() if v is not None}


def write_report(report: Mapping[str, Any], run_dir: Path,
                 title: str = "OSWorld evaluation") -> list[Path]:
    """report.json, report.md and report.png in `run_dir`; the paths written.

    The chart needs matplotlib (the `eval` extra); without it the JSON and
    Markdown are still written, so a long evaluation never loses its report.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    json_path, md_path, png_path = (run_dir / name for name in REPORT_FILES)
    json_path.write_text(json.dumps(report, indent=2) + "\n")
    md_path.write_text(render_markdown(report, title))
    try:
        from cua_rl.report.plots import bar_chart
    except ImportError:
        return [json_path, md_path]
    groups = [*report["groups"], "Overall"]
    bar_chart(chart_values(report), f"{title}: success rate", png_path, highlight=groups)
    return [json_path, md_path, png_path]
