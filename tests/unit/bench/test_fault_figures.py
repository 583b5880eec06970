"""`bench faults` counts lost trajectories of training runs too: what a run reported
(a rollout's summary, a training run's metrics.jsonl) against what its store holds."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from cua_rl.bench.faults.cases import trajectories_lost, trajectories_reported
from cua_rl.config import RunConfig
from cua_rl.reward.samples import GroupSamples
from cua_rl.runtime.telemetry.group_metrics import group_metrics
from cua_rl.types import GroupRecord, TaskVariant, Trajectory, TrajectoryStatus


@dataclass
class _Run:
    kind: str
    run_dir: Path
    printed: dict[str, Any] | None = field(default=None)

    def summary(self) -> dict[str, Any] | None:
        return self.printed


def _metrics(run_dir: Path, records: list[dict[str, Any]], tail: str = "") -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    lines = "".join(json.dumps({"time": 0.0, **r}) + "\n" for r in records)
    (run_dir / "metrics.jsonl").write_text(lines + tail)
    return run_dir


def test_a_killed_and_resumed_training_run_reports_through_its_metrics(tmp_path: Path) -> None:
    run_dir = _metrics(
        tmp_path / "train",
        [
            {"scope": "rollout", "step": 1, "trajectories": 2.0, "success_rate": 0.5},
            {"scope": "policy", "step": 1, "loss": 0.1, "trajectories": 99},  # not a group
            {"scope": "rollout", "step": 2, "trajectories": 1.0},  # one given up
            # the resume appends to the same file, its group numbers start again
            {"scope": "rollout", "step": 1, "trajectories": 2.0},
        ],
        tail='{"scope": "rollout", "step": 2, "traj',
    )  # a line cut short by SIGKILL
    killed, resumed = _Run("train", run_dir), _Run("train", run_dir, {"trajectories": 4})
    assert trajectories_reported([killed, resumed]) == 5  # the file is read once
    assert trajectories_lost([killed, resumed], stored=5) == 0
    assert trajectories_lost([killed, resumed], stored=3) == 2
    # stored but not yet reported when the run was killed (group unfinished): no loss
    assert trajectories_lost([killed, resumed], stored=7) == 0


def test_rollouts_report_through_their_summary(tmp_path: Path) -> None:
    _metrics(tmp_path / "r", [{"scope": "rollout", "step": 1, "trajectories": 8.0}])
    runs = [
        _Run("rollout", tmp_path / "r", {"episodes": 3}),
        _Run("rollout", tmp_path / "r", None),
    ]  # printed no summary
    assert trajectories_reported(runs) == 3
    assert trajectories_lost(runs, stored=2) == 1
    assert trajectories_lost([_Run("train", tmp_path / "missing")], stored=0) == 0


def test_group_metrics_report_the_groups_scored_trajectories() -> None:
    variant = TaskVariant(
        task_id="t",
        domain="os",
        evaluator_name="e",
        instruction="Do it.",
        config=(),
        evaluator={"func": "infeasible"},
    )
    trajs = tuple(
        Trajectory(f"t{k}", variant.variant_id, (), TrajectoryStatus.FINISHED, score=float(k))
        for k in range(3)
    )
    group = GroupRecord("g1", variant, trajs, {}, gave_up=1)
    fleet = SimpleNamespace(counts=Counter(steps=6), busy_s=1.0)
    values = group_metrics(
        group, GroupSamples(), SimpleNamespace(learner_version=0), fleet, RunConfig(), started=0.0
    )
    assert values["trajectories"] == 3.0
