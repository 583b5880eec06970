"""Table 1's layout from the cells' results: rows `before` and each arm; columns
in-domain and out-of-domain success, reward-model process and outcome accuracy.

Each entry is the mean over seeds of the figure at the last evaluated version
(the `before` row: version 0), with its interval from `report/stats.py`
(`mean_interval`: Student's t for fewer than 10 seeds, named in the entry) and n,
the seeds it is over. Each arm is compared with the baseline arm seed by seed
(`paired_differences`): the mean of the per-seed differences and its interval.
The curves (success per evaluated version) are the same entries at every version.
"""

from __future__ import annotations

from typing import Any

from cua_rl.experiment.cells import HELD_OUT, Cell, CellState, eval_set_names
from cua_rl.experiment.spec import BEFORE, ExperimentSpec
from cua_rl.report.stats import mean_interval, paired_differences

COLUMNS = ("in_domain", "out_of_domain", "process_accuracy", "outcome_accuracy")
TITLES = {
    "in_domain": "in-domain success",
    "out_of_domain": "OOD success",
    "process_accuracy": "process accuracy",
    "outcome_accuracy": "outcome accuracy",
}


def _figure(state: CellState, column: str, version: int) -> float | None:
    if column in ("in_domain", "out_of_domain"):
        entry = state.steps.get(f"eval@{version}:{column}")
        return None if entry is None else entry.get("success")
    entry = state.steps.get(f"prm@{version}")
    return None if entry is None else entry.get(column)


def per_seed(
    cells: list[Cell], states: dict[str, CellState], arm: str, column: str, version: int
) -> dict[int, float]:
    """The figure of `column` at `version` for each seed whose cell has it."""
    out: dict[int, float] = {}
    for cell in cells:
        if cell.arm == arm:
            value = _figure(states[cell.name], column, version)
            if value is not None:
                out[cell.seed] = float(value)
    return out


def _entry(values: dict[int, float]) -> dict[str, Any]:
    interval = mean_interval(list(values.values()))
    return {**interval.as_dict(), "values": {str(k): v for k, v in values.items()}}


def build_table(
    spec: ExperimentSpec, cells: list[Cell], states: dict[str, CellState]
) -> dict[str, Any]:
    """table.json: the rows, the paired comparisons and the curves."""
    last = spec.eval.versions[-1]
    labels = {a.name: a.label or a.name for a in spec.arms}
    columns = [
        c
        for c in COLUMNS
        if c in eval_set_names(spec) or (spec.prm_eval is not None and c.endswith("accuracy"))
    ]
    rows = [
        {
            "arm": BEFORE,
            "label": "before (initial models)",
            "version": 0,
            "cells": {c: _entry(per_seed(cells, states, BEFORE, c, 0)) for c in columns},
        }
    ]
    for arm in spec.arms:
        rows.append(
            {
                "arm": arm.name,
                "label": labels[arm.name],
                "version": last,
                "cells": {c: _entry(per_seed(cells, states, arm.name, c, last)) for c in columns},
            }
        )
    comparisons = []
    for arm in spec.arms:
        if arm.name == spec.baseline:
            continue
        entry: dict[str, Any] = {}
        for column in columns:
            a = per_seed(cells, states, arm.name, column, last)
            b = per_seed(cells, states, spec.baseline, column, last)
            if a and b:
                entry[column] = paired_differences(a, b).as_dict()
        comparisons.append(
            {"arm": arm.name, "baseline": spec.baseline, "version": last, "columns": entry}
        )
    curves = {
        arm.name: {
            s: [
                {
                    "version": v,
                    **_entry(per_seed(cells, states, BEFORE if v == 0 else arm.name, s, v)),
                }
                for v in [0, *spec.eval.versions]
            ]
            for s in eval_set_names(spec)
        }
        for arm in spec.arms
    }
    held_out = states.get(HELD_OUT)
    return {
        "experiment": spec.name,
        "description": spec.description,
        "seeds": spec.seeds,
        "baseline": spec.baseline,
        "versions": spec.eval.versions,
        "columns": columns,
        "rows": rows,
        "comparisons": comparisons,
        "curves": curves,
        "held_out": held_out.steps.get("held_out") if held_out else None,
    }


def _fmt(entry: dict[str, Any]) -> str:
    if entry.get("estimate") is None:
        return "n/a (n=0)"
    text = f"{entry['estimate']:.3f}"
    if entry.get("low") is not None:
        text += f" [{entry['low']:.3f}, {entry['high']:.3f}]"
    return f"{text} (n={entry['n']}, {entry['method']})"


def render_markdown(table: dict[str, Any]) -> str:
    """table.md: the rows, then each arm minus the baseline, paired by seed."""
    columns = table["columns"]
    lines = [f"# {table['experiment']}", ""]
    if table["description"]:
        lines += [table["description"].strip(), ""]
    lines += [
        f"Seeds {table['seeds']}; evaluated at policy versions {table['versions']}; "
        "each entry: mean over seeds [95 % interval] (n seeds, interval method).",
        "",
        "| row | version | " + " | ".join(TITLES[c] for c in columns) + " |",
        "|---|---|" + "---|" * len(columns),
    ]
    for row in table["rows"]:
        lines.append(
            f"| {row['label']} | {row['version']} | "
            + " | ".join(_fmt(row["cells"][c]) for c in columns)
            + " |"
        )
    lines += [
        "",
        f"Each arm minus `{table['baseline']}`, paired by seed (mean difference [95 % interval]):",
        "",
        "| arm | " + " | ".join(TITLES[c] for c in columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    for comp in table["comparisons"]:
        cells = []
        for column in columns:
            diff = comp["columns"].get(column)
            cells.append(_fmt(diff["interval"]) if diff else "n/a")
        lines.append(f"| {comp['arm']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
