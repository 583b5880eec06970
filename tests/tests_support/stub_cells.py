"""A stub cell runner for `cua-rl experiment --runner tests_support.stub_cells:StubCells`:
each step writes a small run directory and returns known figures, so a test can
compare table.json with hand-computed means and intervals.

Known figures (seeds 1 and 2, evaluated versions 1 and 2; at version 1 every
success is half of the final one):

| row | seed | in-domain | OOD | outcome acc. | process acc. |
|---|---|---|---|---|---|
| before (v0) | 1, 2 | 0.125, 0.25 | 0.0, 0.125 | 0.5, 0.5 | 0.5, 0.5 |
| policy (v2) | 1, 2 | 0.25, 0.5 | 0.125, 0.375 | - | - |
| reward (v2) | 1, 2 | 0.5, 1.0 | 0.375, 0.875 | 0.6, 0.7 | 0.8, 0.9 |

Every step start and end is appended to OUT/stub-calls.log; $CUA_RL_STUB_DELAY_S
slows each step (checking for an interrupt every 10 ms).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from typing import Any

FINAL_IN_DOMAIN = {
    ("before", 1): 0.125,
    ("before", 2): 0.25,
    ("policy", 1): 0.25,
    ("policy", 2): 0.5,
    ("reward", 1): 0.5,
    ("reward", 2): 1.0,
}
OUTCOME = {("before", 1): 0.5, ("before", 2): 0.5, ("reward", 1): 0.6, ("reward", 2): 0.7}
PROCESS = {("before", 1): 0.5, ("before", 2): 0.5, ("reward", 1): 0.8, ("reward", 2): 0.9}
LAST = 2


def success(arm: str, seed: int, version: int, eval_set: str) -> float:
    value = FINAL_IN_DOMAIN[(arm, seed)] * (0.5 if 0 < version < LAST else 1.0)
    return value - (0.125 if eval_set == "out_of_domain" else 0.0)


class StubCells:
    """A CellRunner that writes known results (see the module docstring)."""

    def __init__(self, progress: Callable[[str], None]) -> None:
        self.progress = progress
        self.stopped = threading.Event()
        self.delay = float(os.environ.get("CUA_RL_STUB_DELAY_S", "0"))

    def interrupt(self) -> None:
        self.stopped.set()

    def _log(self, grid: Any, line: str) -> None:
        with (grid.out / "stub-calls.log").open("a") as f:
            f.write(line + "\n")

    def run_step(self, grid: Any, cell: Any, step: Any, state: Any) -> dict[str, Any]:
        self._log(grid, f"start {cell.name} {step.key}")
        deadline = time.monotonic() + self.delay
        while time.monotonic() < deadline:
            if self.stopped.wait(0.01):
                self._log(grid, f"interrupted {cell.name} {step.key}")
                return {}
        result = self._figures(cell, step)
        cell.run_dir.mkdir(parents=True, exist_ok=True)
        (cell.run_dir / f"{step.key.replace(':', '_').replace('@', '_')}.json").write_text(
            json.dumps(result)
        )
        self._log(grid, f"end {cell.name} {step.key}")
        return result

    def _figures(self, cell: Any, step: Any) -> dict[str, Any]:
        key = (cell.arm, cell.seed)
        if step.kind == "eval":
            return {"success": success(cell.arm, cell.seed, step.version, step.eval_set), "n": 8}
        if step.kind == "prm":
            return {
                "outcome_accuracy": OUTCOME[key],
                "process_accuracy": PROCESS[key],
                "steps": 40,
                "labelled": 40,
            }
        if step.kind == "train":
            return {"policy_version": step.version}
        if step.kind == "held_out":
            return {"success": 0.1, "n": 16}
        return {"runs_show": {"trajectories": 8}}
