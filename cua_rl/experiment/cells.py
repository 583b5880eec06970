"""The grid of an experiment: its cells, the steps of each, and what is done.

A cell is one arm at one seed (an ordinary train run directory, `cells/<arm>-s<seed>/run`),
or the `before` evaluation of the initial models at one seed, or the held-out set of
reward-model accuracy. Its steps run in order; each finished step's result is
written to `cells/<cell>/cell.json` at once (replaced atomically), so a grid stopped
anywhere reruns only what it had not finished: a finished cell is skipped, an
interrupted training segment is resumed (`cua-rl train --resume`).

Training runs in segments: to the first evaluated version, evaluation of the
exported policy (and reward model), resume to the next version, and so on. That
uses the checkpoints as they are (a run keeps its newest two versions), and the
evaluated weights are exactly the version asked for.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from cua_rl.experiment.spec import BEFORE, Arm, ExperimentSpec, arm_order

StepKind = Literal["held_out", "model_from", "train", "eval", "prm", "summary"]
HELD_OUT = "held-out"
STATE_FILE = "cell.json"


@dataclass(frozen=True, slots=True)
class Step:
    """One command of a cell: train to `version`, evaluate the policy of `version` on
    `eval_set`, measure the reward model of `version`, ..."""

    kind: StepKind
    version: int = 0
    eval_set: str = ""

    @property
    def key(self) -> str:
        if self.kind == "eval":
            return f"eval@{self.version}:{self.eval_set}"
        if self.kind in ("train", "prm"):
            return f"{self.kind}@{self.version}"
        return self.kind


@dataclass(frozen=True, slots=True)
class Cell:
    """One cell of the grid and the steps it runs."""

    name: str
    """Folder name: `<arm>-s<seed>`, `before-s<seed>` or `held-out`."""
    arm: str
    """The arm's name, `before` or `held-out`."""
    seed: int
    steps: tuple[Step, ...]
    dir: Path
    arm_spec: Arm | None = None
    """The arm (None for the before and held-out cells)."""

    @property
    def run_dir(self) -> Path:
        """The cell's train run directory (an ordinary one)."""
        return self.dir / "run"


@dataclass
class CellState:
    """What a cell has finished: each step's result, by step key."""

    path: Path
    steps: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def load(cls, cell: Cell) -> CellState:
        path = cell.dir / STATE_FILE
        if not path.is_file():
            return cls(path)
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            from cua_rl.errors import RunDirError

            raise RunDirError(
                f"{path}: cannot read the cell's state ({exc}); move it away to rerun the cell"
            ) from exc
        steps = data.get("steps") if isinstance(data, dict) else None
        if not isinstance(steps, dict):
            from cua_rl.errors import RunDirError

            raise RunDirError(f'{path}: expected an object with "steps"')
        return cls(path, steps)

    def done(self, step: Step) -> bool:
        return step.key in self.steps

    def record(self, cell: Cell, step: Step, result: dict[str, Any], wall_s: float) -> None:
        """Add a finished step and write the file atomically (a stop leaves the old
        file or the new one, never half of one)."""
        self.steps[step.key] = {
            **result,
            "wall_s": round(wall_s, 1),
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".json.tmp")
        tmp.write_text(
            json.dumps(
                {"cell": cell.name, "arm": cell.arm, "seed": cell.seed, "steps": self.steps},
                indent=1,
            )
        )
        os.replace(tmp, self.path)


def cell_status(cell: Cell, state: CellState) -> str:
    """`done`, `partial` (some steps, or a run directory, exist) or `pending`."""
    finished = sum(state.done(s) for s in cell.steps)
    if finished == len(cell.steps):
        return "done"
    if finished or cell.run_dir.exists():
        return "partial"
    return "pending"


def _arm_steps(spec: ExperimentSpec, arm: Arm, trains_prm: bool) -> tuple[Step, ...]:
    steps: list[Step] = [Step("model_from")] if arm.model_from else []
    for version in spec.eval.versions:
        steps.append(Step("train", version))
        steps += [Step("eval", version, name) for name in eval_set_names(spec)]
        if spec.prm_eval is not None and trains_prm:
            steps.append(Step("prm", version))
    steps.append(Step("summary"))
    return tuple(steps)


def eval_set_names(spec: ExperimentSpec) -> list[str]:
    """The evaluation sets of the file, in the table's column order."""
    return ["in_domain", *(["out_of_domain"] if spec.eval.sets.out_of_domain else [])]


def plan_cells(spec: ExperimentSpec, out: Path, trains_prm: dict[str, bool]) -> list[Cell]:
    """Every cell in the order they run: the held-out set, then seed by seed the
    initial models and each arm (an arm after the arm it takes a model from). Seed by
    seed, so that a grid cut short still has whole seeds to compare arms on.
    `trains_prm[arm]`: whether the arm trains a reward model (its accuracy is measured)."""
    root = out / "cells"
    cells: list[Cell] = []
    if spec.prm_eval is not None:
        cells.append(
            Cell(HELD_OUT, HELD_OUT, spec.prm_eval.seed, (Step("held_out"),), root / HELD_OUT)
        )
    before = [Step("eval", 0, name) for name in eval_set_names(spec)]
    if spec.prm_eval is not None:
        before.append(Step("prm", 0))
    arms = arm_order(spec)
    for seed in spec.seeds:
        name = f"{BEFORE}-s{seed}"
        cells.append(Cell(name, BEFORE, seed, tuple(before), root / name))
        for arm in arms:
            name = f"{arm.name}-s{seed}"
            cells.append(
                Cell(
                    name,
                    arm.name,
                    seed,
                    _arm_steps(spec, arm, trains_prm[arm.name]),
                    root / name,
                    arm,
                )
            )
    return cells
