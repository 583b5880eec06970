"""Every cell of a grid as a reader checks it: seed, wall time, its figures at each
evaluated version and its run's `runs show --json` summary (the headline keys;
the whole summary is in the cell's cell.json)."""

from __future__ import annotations

from typing import Any

from cua_rl.experiment.cells import Cell, CellState, cell_status

SUMMARY_KEYS = (
    "trajectories",
    "steps",
    "aborted",
    "policy_updates",
    "prm_updates",
    "adapt_proposals",
    "adapt_accepted",
    "wall_s",
    "invocations",
)
"""The `runs show --json` keys the listing shows."""


def _round(value: Any) -> Any:
    return round(value, 3) if isinstance(value, float) else value


def list_cells(cells: list[Cell], states: dict[str, CellState]) -> list[dict[str, Any]]:
    """One entry per cell: state, seed, wall time (its steps' sum), each step's figures."""
    out = []
    for cell in cells:
        state = states[cell.name]
        figures: dict[str, Any] = {}
        for key, entry in state.steps.items():
            if key.startswith("eval@"):
                figures[key] = {"success": _round(entry.get("success")), "n": entry.get("n")}
            elif key.startswith("prm@"):
                figures[key] = {
                    k: _round(entry.get(k))
                    for k in ("outcome_accuracy", "process_accuracy", "steps", "labelled")
                }
            elif key.startswith("train@"):
                figures[key] = {
                    "policy_version": entry.get("policy_version"),
                    "prm_version": entry.get("prm_version"),
                    "wall_s": entry.get("wall_s"),
                }
            elif key == "held_out":
                figures[key] = {"success": _round(entry.get("success")), "n": entry.get("n")}
        summary = state.steps.get("summary", {}).get("runs_show") or {}
        out.append(
            {
                "cell": cell.name,
                "arm": cell.arm,
                "seed": cell.seed,
                "state": cell_status(cell, state),
                "wall_s": round(sum(e.get("wall_s", 0.0) for e in state.steps.values()), 1),
                "figures": figures,
                "runs_show": {k: summary.get(k) for k in SUMMARY_KEYS if k in summary},
                "run_dir": str(cell.run_dir),
            }
        )
    return out


def render_cells(listed: list[dict[str, Any]]) -> str:
    """The cells as a Markdown table (table.md's last section)."""
    lines = ["| cell | seed | state | wall | figures | `runs show` |", "|---|---|---|---|---|---|"]
    for c in listed:
        figures = "; ".join(
            f"{key} " + ", ".join(f"{k}={v}" for k, v in values.items() if v is not None)
            for key, values in c["figures"].items()
        )
        shown = ", ".join(f"{k}={v}" for k, v in c["runs_show"].items())
        lines.append(
            f"| {c['cell']} | {c['seed']} | {c['state']} | {c['wall_s'] / 60:.1f} min "
            f"| {figures} | {shown} |"
        )
    return "\n".join(lines) + "\n"
