"""report.md of an evaluation: what ran (the manifest's summary), the truthful counts
with each rate's interval, pass@k and pass^k, then one table per domain.

The counts tables are also what `cua-rl eval` prints (`render_counts`), so the
terminal and the file never disagree.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cua_rl.report.eval_report import SETUP_FAILED


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def _with_interval(value: float | None, interval: Mapping[str, Any] | None) -> str:
    """`62.5% [40.0, 85.0]`: a rate and its interval in points (the rate alone when
    the scope has no interval)."""
    if value is None:
        return "–"
    low, high = (interval or {}).get("low"), (interval or {}).get("high")
    if low is None or high is None:
        return _pct(value)
    return f"{_pct(value)} [{100 * low:.1f}, {100 * high:.1f}]"


def _task_cell(row: Mapping[str, Any]) -> str:
    if row["scores"]:
        return ", ".join(f"{s:g}" for s in row["scores"])
    if row.get("state") in (SETUP_FAILED, "unsupported"):
        reason = str(row.get("reason", "")).replace("|", "/").replace("\n", " ")[:200]
        return f"{row['state']}: {reason}"
    return "(no run yet)"


def render_counts(report: Mapping[str, Any]) -> str:
    """The truthful counts as two Markdown tables (overall and groups, domains), each
    rate with its 95 % interval: what `cua-rl eval` prints and report.md holds."""
    header = [
        "| scope | tasks | attempted | scored | setup failed | unsupported "
        "| success (scored) [95 % CI] | success (all) [95 % CI] |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]

    def counts(name: str, row: Mapping[str, Any]) -> str:
        return (
            f"| {name} | {row['tasks']} | {row['attempted']} | {row['scored']} "
            f"| {row['setup_failed']} | {row['unsupported']} "
            f"| {_with_interval(row['mean'], row.get('interval_scored'))} "
            f"| {_with_interval(row['rate_all'], row.get('interval_all'))} |"
        )

    lines = ["## Overall and groups", "", *header, counts("**Overall**", report["overall"])]
    for name, group in report["groups"].items():
        lines.append(counts(f"{name} ({' + '.join(group['domains'])})", group))
    lines += ["", "## Domains", "", *header]
    lines += [counts(domain, row) for domain, row in report["domains"].items()]
    return "\n".join(lines) + "\n"


def render_pass_k(report: Mapping[str, Any]) -> list[str]:
    """pass@k and pass^k per k, over all tasks and over the tasks with k scored runs."""
    table = report.get("pass_k") or {}
    if not table:
        return []
    lines = [
        "## pass@k and pass^k",
        "",
        "Expected best (pass@k) and worst (pass^k) score of k runs of a task; "
        "pass@1 is the success rate. Over all tasks, a task without k scored runs "
        "counts as 0.",
        "",
        "| k | pass@k (all) | pass@k (scored) | pass^k (all) | pass^k (scored) | tasks |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for k, entry in table.items():
        best, worst = entry["pass_at_k"], entry["pass_hat_k"]
        lines.append(
            f"| {k} | {_pct(best['all'])} | {_pct(best['scored'])} "
            f"| {_pct(worst['all'])} | {_pct(worst['scored'])} | {best['tasks']} |"
        )
    return lines


def render_markdown(
    report: Mapping[str, Any],
    title: str = "OSWorld evaluation",
    manifest: Mapping[str, Any] | None = None,
) -> str:
    """What ran first, then overall and groups, pass@k, and one table per domain."""
    overall, proto = report["overall"], report["protocol"]
    lines = [f"# {title}", ""]
    if manifest:
        from cua_rl.report.manifest.summary import summary_lines

        lines += summary_lines(manifest) + [""]
    shown = [f"{k} {v}" for k, v in proto.items() if v is not None]
    if shown:
        lines += ["Protocol: " + ", ".join(shown) + ".", ""]
    expected = overall["runs_expected"]
    lines += [
        f"Task runs scored: {overall['runs_done']}"
        + (f" of {expected}" if expected is not None else "")
        + (
            f" ({overall['unsupported']} unsupported task(s) not run)"
            if overall["unsupported"]
            else ""
        )
        + ".",
        "",
    ]
    stats = report.get("statistics")
    if stats:
        lines += [f"Intervals: {100 * stats['level']:g} %, {stats['interval']}.", ""]
    lines += render_counts(report).splitlines()
    pass_k = render_pass_k(report)
    if pass_k:
        lines += ["", *pass_k]
    for domain in report["domains"]:
        lines += ["", f"### {domain}", "", "| task | mean | run scores |", "| --- | ---: | --- |"]
        for task_id, row in report["tasks"].items():
            if row["domain"] == domain:
                lines.append(f"| {task_id} | {_pct(row['mean'])} | {_task_cell(row)} |")
    if overall["incomplete_tasks"]:
        lines += [
            "",
            "Tasks without a scored run (left out of the means): "
            + ", ".join(overall["incomplete_tasks"])
            + ".",
        ]
    return "\n".join(lines) + "\n"
