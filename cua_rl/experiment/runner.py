"""Running a grid: cells one after another, each step's result saved as it finishes.

What a step does is a `CellRunner`'s: `commands.CommandRunner` runs each step as a
`cua-rl` command in a child process (train, export model, rollout, eval-prm); a
test gives a stub that writes known results. The grid itself only decides what
is left to do, prints where it is, and stops cleanly on SIGTERM or Ctrl-C: the
step in flight is asked to stop (the child gets SIGTERM, which leaves a run that
`--resume` continues), nothing of it is recorded, and the next run of the same
command does it again from there.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from cua_rl.errors import CuaRlError
from cua_rl.experiment.cells import Cell, CellState, Step, cell_status
from cua_rl.experiment.spec import ExperimentSpec


class GridStopped(CuaRlError):
    """The grid was stopped (SIGTERM, Ctrl-C) before it finished; rerun to continue."""


@dataclass
class Grid:
    """An experiment laid out: what every step may need to know."""

    spec: ExperimentSpec
    spec_file: Path
    out: Path
    cells: list[Cell]
    stop: threading.Event = field(default_factory=threading.Event)

    def cell(self, name: str) -> Cell:
        return next(c for c in self.cells if c.name == name)

    def states(self) -> dict[str, CellState]:
        return {c.name: CellState.load(c) for c in self.cells}


class CellRunner(Protocol):
    """Runs one step of a cell and returns its result (saved in cell.json)."""

    def run_step(self, grid: Grid, cell: Cell, step: Step, state: CellState) -> dict[str, Any]: ...

    def interrupt(self) -> None:
        """Stop the step in flight (called from a signal handler's thread)."""


Progress = Callable[[str], None]


def _elapsed(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


@contextlib.contextmanager
def stop_on_signals(grid: Grid, runner: CellRunner) -> Iterator[None]:
    """SIGTERM and SIGINT set `grid.stop` and interrupt the step in flight, for the
    duration of the grid (the previous handlers are restored after)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handle(signum: int, _frame: Any) -> None:
        grid.stop.set()
        runner.interrupt()

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def run_grid(grid: Grid, runner: CellRunner, progress: Progress) -> dict[str, int]:
    """Run every step not yet done, cell after cell; returns how many cells were
    skipped (done before), run, and steps run. Raises GridStopped on a signal."""
    started = time.monotonic()
    counts = {"cells_skipped": 0, "cells_run": 0, "steps_run": 0}
    total = len(grid.cells)
    with stop_on_signals(grid, runner):
        for number, cell in enumerate(grid.cells, 1):
            state = CellState.load(cell)
            if cell_status(cell, state) == "done":
                counts["cells_skipped"] += 1
                continue
            counts["cells_run"] += 1
            todo = [s for s in cell.steps if not state.done(s)]
            for step_number, step in enumerate(todo, 1):
                if grid.stop.is_set():
                    raise GridStopped(
                        f"stopped before {cell.name} {step.key}; rerun the same command to continue"
                    )
                progress(
                    f"[cell {number}/{total} {cell.name}] step {step_number}/{len(todo)} "
                    f"{step.key} (elapsed {_elapsed(time.monotonic() - started)})"
                )
                t0 = time.monotonic()
                result = runner.run_step(grid, cell, step, state)
                if grid.stop.is_set():  # the step was interrupted: its result is not one
                    raise GridStopped(
                        f"stopped during {cell.name} {step.key}; rerun the same command to continue"
                    )
                state.record(cell, step, result, time.monotonic() - t0)
                counts["steps_run"] += 1
                progress(
                    f"[cell {number}/{total} {cell.name}] {step.key} done in "
                    f"{_elapsed(time.monotonic() - t0)}: {brief(result)}"
                )
    progress(
        f"grid finished in {_elapsed(time.monotonic() - started)}: "
        f"{counts['cells_run']} cell(s) run, {counts['cells_skipped']} already done"
    )
    return counts


def brief(result: dict[str, Any]) -> str:
    """A step's headline figures for the progress line."""
    keys = (
        "success",
        "n",
        "policy_version",
        "outcome_accuracy",
        "process_accuracy",
        "version",
        "trajectories",
    )
    parts = []
    for key in keys:
        if key in result and result[key] is not None:
            value = result[key]
            parts.append(f"{key}={value:.3f}" if isinstance(value, float) else f"{key}={value}")
    return " ".join(parts) or "ok"
