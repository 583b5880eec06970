"""An experiment from its file to its outputs: lay the grid out, list it, run it,
write table.json, table.md and curves.png (`cua-rl experiment`)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

from cua_rl.errors import ConfigError
from cua_rl.experiment.cells import CellState, cell_status, plan_cells
from cua_rl.experiment.runner import CellRunner, Grid, Progress, run_grid
from cua_rl.experiment.spec import ExperimentSpec, arm_config_path, load_experiment


def trains_reward_model(spec: ExperimentSpec, spec_file: Path) -> dict[str, bool]:
    """Whether each arm trains a reward model (judge on, `train.prm.enabled`); resolving
    every arm's config here also refuses a file with a bad preset or override before
    anything runs, naming the arm."""
    from cua_rl.runtime.run_config import resolve_run_config

    out = {}
    for arm in spec.arms:
        path = arm_config_path(spec_file, arm)
        extra = [f"{arm.model_from.key}=tiny"] if arm.model_from else []
        try:
            cfg = resolve_run_config(
                str(path) if path else None, arm.preset, (*spec.common, *arm.overrides, *extra)
            )
        except ConfigError as exc:
            raise ConfigError(f"{spec_file}: arm {arm.name!r}: {exc}") from None
        out[arm.name] = cfg.judge.enabled and cfg.train.prm.enabled
    return out


def open_grid(spec_file: Path, out: Path | None) -> Grid:
    """The experiment of `spec_file` laid out in `out` (default runs/experiments/<name>)."""
    spec = load_experiment(spec_file)
    root = out or Path("runs") / "experiments" / spec.name
    cells = plan_cells(spec, root, trains_reward_model(spec, spec_file))
    return Grid(spec, spec_file.resolve(), root, cells)


def listing(grid: Grid) -> dict[str, Any]:
    """Every cell with its state and steps done (what --list prints)."""
    cells = []
    for cell in grid.cells:
        state = CellState.load(cell)
        cells.append(
            {
                "cell": cell.name,
                "arm": cell.arm,
                "seed": cell.seed,
                "state": cell_status(cell, state),
                "steps_done": sum(state.done(s) for s in cell.steps),
                "steps": [s.key for s in cell.steps],
                "dir": str(cell.dir),
            }
        )
    return {"experiment": grid.spec.name, "out": str(grid.out), "cells": cells}


def render_listing(listed: dict[str, Any]) -> str:
    lines = [f"{listed['experiment']} -> {listed['out']}"]
    for c in listed["cells"]:
        lines.append(
            f"  {c['cell']:<24} {c['state']:<8} {c['steps_done']}/{len(c['steps'])} "
            f"steps  ({', '.join(c['steps'])})"
        )
    return "\n".join(lines)


def load_runner(spec: str | None, progress: Progress) -> CellRunner:
    """The cells' runner: `cua-rl` commands, or `module:attr` (a class taking
    `progress`, e.g. the test suite's stub that writes known results)."""
    if spec is None:
        from cua_rl.experiment.commands import CommandRunner

        return CommandRunner(progress)
    module, _, attr = spec.partition(":")
    if not module or not attr:
        raise ConfigError(f"--runner {spec!r}: expected module:attribute")
    try:
        factory = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"--runner {spec!r}: cannot import it ({exc})") from None
    return factory(progress)


def write_outputs(grid: Grid) -> dict[str, str]:
    """table.json, table.md and curves.png in the experiment's folder."""
    from cua_rl.experiment.cell_listing import list_cells, render_cells
    from cua_rl.experiment.curves import write_curves
    from cua_rl.experiment.table import build_table, render_markdown

    states = grid.states()
    table = build_table(grid.spec, grid.cells, states)
    table["cells"] = list_cells(grid.cells, states)
    grid.out.mkdir(parents=True, exist_ok=True)
    (grid.out / "table.json").write_text(json.dumps(table, indent=1))
    (grid.out / "table.md").write_text(
        render_markdown(table) + "\n## Cells\n\n" + render_cells(table["cells"])
    )
    png = write_curves(table, grid.out / "curves.png")
    return {
        "table_json": str(grid.out / "table.json"),
        "table_md": str(grid.out / "table.md"),
        "curves_png": str(png),
    }


SPEC_RECORD = "experiment.json"
IGNORED = ("description", "step_timeout_s")
"""Spec keys that may change between runs of one folder (they change no result)."""


def check_spec_record(grid: Grid) -> None:
    """Record the file's settings in the folder on the first run; refuse a later run
    whose file differs in anything that decides results (finished steps would be
    mixed with steps of another experiment)."""
    path = grid.out / SPEC_RECORD
    current = grid.spec.model_dump(mode="json", exclude=set(IGNORED))
    if not path.is_file():
        grid.out.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(current, indent=1))
        return
    try:
        recorded = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the recorded experiment ({exc})") from None
    changed = sorted(k for k in set(current) | set(recorded) if current.get(k) != recorded.get(k))
    if changed:
        raise ConfigError(
            f"{grid.spec_file}: differs from the experiment {grid.out} was "
            f"started with ({', '.join(changed)}); give another --out, or "
            f"move {path} away to reuse the finished steps anyway"
        )


def run_experiment(grid: Grid, runner: CellRunner, progress: Progress) -> dict[str, Any]:
    """Run what is left of the grid, then write the outputs."""
    check_spec_record(grid)
    counts = run_grid(grid, runner, progress)
    return {**counts, **write_outputs(grid)}
