"""The evaluation report's files: report.json, report.md (`eval_markdown`) and
report.png, the chart of the OSWorld-comparable rate (over all tasks) with its
interval per domain, group and overall."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cua_rl.report.eval_markdown import render_markdown

REPORT_FILES = ("report.json", "report.md", "report.png")


def chart_values(report: Mapping[str, Any]) -> dict[str, tuple[float, float, float]]:
    """(rate over all tasks, interval low, interval high) in percent per domain, then
    per group, then overall: the OSWorld-comparable figure; scopes without tasks
    are left out."""
    scopes = {**report["domains"], **report["groups"], "Overall": report["overall"]}
    out = {}
    for name, row in scopes.items():
        if row["rate_all"] is None:
            continue
        interval = row.get("interval_all") or {}
        low, high = interval.get("low"), interval.get("high")
        rate = 100 * row["rate_all"]
        out[name] = (rate, rate if low is None else 100 * low, rate if high is None else 100 * high)
    return out


def write_report(
    report: Mapping[str, Any],
    run_dir: Path,
    title: str = "OSWorld evaluation",
    manifest: Mapping[str, Any] | None = None,
) -> list[Path]:
    """report.json, report.md (with `manifest` summarized at its top) and
    report.png in `run_dir`; the paths written.

    The chart needs matplotlib (the `eval` extra); without it the JSON and
    Markdown are still written, so a long evaluation never loses its report.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    json_path, md_path, png_path = (run_dir / name for name in REPORT_FILES)
    json_path.write_text(json.dumps(report, indent=2) + "\n")
    md_path.write_text(render_markdown(report, title, manifest))
    try:
        from cua_rl.report.plots import bar_chart
    except ImportError:
        return [json_path, md_path]
    values = chart_values(report)
    groups = [*report["groups"], "Overall"]
    bar_chart(
        {k: v[0] for k, v in values.items()},
        f"{title}: success rate over all tasks (95 % interval)",
        png_path,
        highlight=groups,
        errors={k: (v[1], v[2]) for k, v in values.items()},
    )
    return [json_path, md_path, png_path]
