"""The real cells: each step is the `cua-rl` command a person would type.

- `held_out`: `rollout` of the initial policy on the held-out tasks, no judge;
- `model_from`: `export model OTHER_CELL/run --role R` (the arm's `model_from`);
- `train@v`: `train --out RUN ... train.max_policy_updates=v` (the first segment),
  then `train --resume RUN train.max_policy_updates=v`: overrides apply on top of
  the saved config, and the learner stops at a total version, so the same run goes
  on to v;
- `eval@v:set`: `export model RUN --role policy --version v`, then
  `rollout RUN/config.yaml --model DIR judge.enabled=false fleet.group_size=N <set>`;
- `prm@v`: `export model RUN --role prm`, then `eval-prm HELD_OUT --model DIR`;
- `summary`: `runs show RUN --json`, read in process.

Version 0 (the `before` cells) evaluates the models the baseline arm starts from,
without export. Evaluations of one seed use that seed for every arm, so arms are
compared on the same request seeds.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cua_rl.errors import RunFailed
from cua_rl.experiment.cells import HELD_OUT, Cell, CellState, Step
from cua_rl.experiment.child import ChildCommands
from cua_rl.experiment.results import json_output, prm_accuracy, rollout_success, run_summary
from cua_rl.experiment.runner import Grid
from cua_rl.experiment.spec import Arm, arm_config_path


def arm_source(grid: Grid, arm: Arm) -> list[str]:
    """CONFIG and/or --preset of an arm as command-line words."""
    path = arm_config_path(grid.spec_file, arm)
    return [str(path)] if path else ["--preset", str(arm.preset)]


def arm_overrides(grid: Grid, arm: Arm, seed: int) -> list[str]:
    """The experiment's common overrides, the arm's own, and the seed."""
    return [*grid.spec.common, *arm.overrides, f"seed={seed}"]


def baseline(grid: Grid) -> Arm:
    return next(a for a in grid.spec.arms if a.name == grid.spec.baseline)


class CommandRunner:
    """A `CellRunner` whose steps are `cua-rl` commands in child processes."""

    def __init__(self, progress: Callable[[str], None], *, heartbeat_s: float = 60.0) -> None:
        self.children = ChildCommands(progress, heartbeat_s=heartbeat_s)

    def interrupt(self) -> None:
        self.children.interrupt()

    def _cli(self, grid: Grid, cell: Cell, args: list[str], name: str) -> str:
        return self.children.run(
            args, cell.dir / "logs" / f"{name}.log", timeout_s=grid.spec.step_timeout_s
        )

    def _json(self, grid: Grid, cell: Cell, args: list[str], name: str) -> Any:
        out = self._cli(grid, cell, [*args, "--json"], name)
        if grid.stop.is_set():
            return {}
        return json_output(out, f"{cell.name} {name}")

    def run_step(self, grid: Grid, cell: Cell, step: Step, state: CellState) -> dict[str, Any]:
        handler = {
            "held_out": self._held_out,
            "model_from": self._model_from,
            "train": self._train,
            "eval": self._eval,
            "prm": self._prm,
            "summary": self._summary,
        }[step.kind]
        return handler(grid, cell, step, state)

    def _held_out(self, grid: Grid, cell: Cell, step: Step, state: CellState) -> dict[str, Any]:
        prm_eval = grid.spec.prm_eval
        assert prm_eval is not None
        arm = baseline(grid)
        args = [
            "rollout",
            *arm_source(grid, arm),
            "--out",
            str(cell.run_dir),
            "--overwrite",
            *arm_overrides(grid, arm, prm_eval.seed),
            "judge.enabled=false",
            f"fleet.group_size={prm_eval.rollouts}",
            *prm_eval.tasks,
            *prm_eval.overrides,
        ]
        counts = self._json(grid, cell, args, "held-out")
        if grid.stop.is_set():
            return {}
        return {**rollout_success(cell.run_dir), "counts": counts}

    def _export(
        self, grid: Grid, cell: Cell, run_dir: Path, role: str, out: Path, version: int | None
    ) -> dict[str, Any]:
        if (out / "config.json").is_file() and (out / "export.json").is_file():
            return json.loads((out / "export.json").read_text())
        if out.exists():  # an export cut short: written again
            shutil.rmtree(out)
        args = ["export", "model", str(run_dir), "--role", role, "--out", str(out)]
        if version is not None:
            args += ["--version", str(version)]
        info = self._json(grid, cell, args, f"export-{role}")
        if grid.stop.is_set():
            return {}
        (out / "export.json").write_text(json.dumps(info))
        return info

    def _model_from(self, grid: Grid, cell: Cell, step: Step, state: CellState) -> dict[str, Any]:
        source = cell.arm_spec.model_from if cell.arm_spec else None
        assert source is not None
        other = grid.cell(f"{source.arm}-s{cell.seed}")
        out = cell.dir / "models" / f"from-{source.arm}-{source.role}"
        info = self._export(grid, cell, other.run_dir, source.role, out, None)
        return {
            "path": str(out),
            "version": info.get("version"),
            "key": source.key,
            "from": other.name,
        }

    def _train(self, grid: Grid, cell: Cell, step: Step, state: CellState) -> dict[str, Any]:
        arm = cell.arm_spec
        assert arm is not None
        until = f"train.max_policy_updates={step.version}"
        if (cell.run_dir / "config.yaml").is_file():
            args = ["train", "--resume", str(cell.run_dir), until]
        else:
            extra = []
            if "model_from" in state.steps:
                taken = state.steps["model_from"]
                extra = [f"{taken['key']}={taken['path']}"]
            args = [
                "train",
                *arm_source(grid, arm),
                "--out",
                str(cell.run_dir),
                *arm_overrides(grid, arm, cell.seed),
                *extra,
                until,
            ]
        summary = self._json(grid, cell, args, f"train-v{step.version}")
        if grid.stop.is_set():
            return {}
        version = summary.get("policy_version") if isinstance(summary, dict) else None
        if not isinstance(version, int) or version < step.version:
            raise RunFailed(
                f"{cell.name}: training to version {step.version} ended at "
                f"{version!r} (log: {cell.dir / 'logs'}); see `cua-rl runs show "
                f"{cell.run_dir}`"
            )
        return summary

    def _eval(self, grid: Grid, cell: Cell, step: Step, state: CellState) -> dict[str, Any]:
        spec = grid.spec
        sets = spec.eval.sets
        chosen = sets.in_domain if step.eval_set == "in_domain" else sets.out_of_domain or []
        out = cell.dir / "evals" / f"v{step.version}-{step.eval_set}"
        if step.version == 0:
            arm = baseline(grid)
            head = [*arm_source(grid, arm), *arm_overrides(grid, arm, cell.seed)]
        else:
            model = cell.dir / "models" / f"policy-v{step.version}"
            self._export(grid, cell, cell.run_dir, "policy", model, step.version)
            if grid.stop.is_set():
                return {}
            head = [str(cell.run_dir / "config.yaml"), "--model", str(model), f"seed={cell.seed}"]
        args = [
            "rollout",
            *head,
            "--out",
            str(out),
            "--overwrite",
            "judge.enabled=false",
            f"fleet.group_size={spec.eval.rollouts}",
            *chosen,
            *spec.eval.overrides,
        ]
        self._json(grid, cell, args, f"eval-v{step.version}-{step.eval_set}")
        if grid.stop.is_set():
            return {}
        return rollout_success(out)

    def _prm(self, grid: Grid, cell: Cell, step: Step, state: CellState) -> dict[str, Any]:
        from cua_rl.runtime.run_config import resolve_run_config

        held_out = grid.cell(HELD_OUT).run_dir
        if step.version == 0:
            arm = baseline(grid)
            path = arm_config_path(grid.spec_file, arm)
            cfg = resolve_run_config(
                str(path) if path else None, arm.preset, tuple(arm_overrides(grid, arm, cell.seed))
            )
            model = cfg.prm.model
        else:
            cfg = resolve_run_config(str(cell.run_dir / "config.yaml"), None, ())
            out_model = cell.dir / "models" / f"prm-v{step.version}"
            info = self._export(grid, cell, cell.run_dir, "prm", out_model, None)
            if grid.stop.is_set():
                return {}
            model = str(out_model)
        out = cell.dir / "prm" / f"v{step.version}"
        args = [
            "eval-prm",
            str(held_out),
            "--out",
            str(out),
            "--model",
            model,
            "--votes",
            str(cfg.judge.votes),
            "--temperature",
            str(cfg.judge.temperature),
            "--max-tokens",
            str(cfg.judge.max_tokens),
        ]
        prm_eval = grid.spec.prm_eval
        if prm_eval is not None and prm_eval.label_url:
            args += ["--label-url", prm_eval.label_url]
            if prm_eval.label_model:
                args += ["--label-model", prm_eval.label_model]
            if prm_eval.label_max_tokens:
                args += ["--label-max-tokens", str(prm_eval.label_max_tokens)]
        report = self._json(grid, cell, args, f"prm-v{step.version}")
        if grid.stop.is_set():
            return {}
        result = prm_accuracy(report, out)
        if step.version:
            result["prm_version"] = info.get("version")
        return result

    def _summary(self, grid: Grid, cell: Cell, step: Step, state: CellState) -> dict[str, Any]:
        return {"runs_show": run_summary(cell.run_dir)}
