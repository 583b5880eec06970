"""`cua-rl eval --like RUN_DIR` and `--dry-run`: an evaluation planned before anything
starts, its manifest built, and (with `--like`) everything named that differs from
the earlier run's manifest and so cannot be reproduced.

Scores of a rerun are not expected to be bitwise equal even when nothing differs:
greedy decoding on a batching server and a desktop's timing vary from one run to
the next. The differences say what changed on top of that.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cua_rl.config import RunConfig
from cua_rl.report.manifest.differences import Difference, differences, summarize
from cua_rl.report.manifest.files import read_manifest
from cua_rl.report.manifest.like import like_config
from cua_rl.runtime.evaluation_run import planned_manifest

DEFAULT_RUNS = 3


@dataclass
class EvalPlan:
    """What one `eval` invocation runs."""

    cfg: RunConfig
    runs: int
    manifest: dict[str, Any]
    like: Path | None = None
    differences: list[Difference] = field(default_factory=list)
    like_has_manifest: bool = True
    """False for a `--like` run made before manifests (nothing to compare)."""

    def lines(self) -> list[str]:
        """What a person reads about the rerun (stderr), one line each."""
        if self.like is None:
            return []
        if not self.like_has_manifest:
            return [
                f"eval --like {self.like}: it has no manifest.json (made before "
                "manifests): its config is rerun, nothing can be compared"
            ]
        if not self.differences:
            return [
                f"eval --like {self.like}: nothing differs in what runs (scores are "
                "still not expected to be bitwise equal)"
            ]
        return [
            f"eval --like {self.like}: cannot reproduce:",
            *(f"  {line}" for line in summarize(self.differences)),
        ]

    def as_dict(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "like": str(self.like) if self.like else None,
            "differences": [d.as_dict() for d in self.differences],
            "manifest": self.manifest,
        }


def plan_eval(
    cfg: RunConfig | None,
    run_dir: Path,
    runs: int | None,
    *,
    like: Path | None = None,
    overrides: tuple[str, ...] = (),
    full_hash: bool = False,
) -> EvalPlan:
    """The plan of an evaluation into `run_dir`: `cfg` as given, or with `like` the
    config of that earlier evaluation with `overrides` on top (and its run count
    unless `runs` is given)."""
    old_manifest = None
    if like is not None:
        cfg, like_runs, old_manifest = like_config(like, overrides)
        runs = runs or like_runs
    assert cfg is not None, "plan_eval needs a config or a run to be like"
    runs = runs or DEFAULT_RUNS
    manifest = planned_manifest(
        cfg,
        runs,
        full_hash=full_hash,
        previous=read_manifest(run_dir) if run_dir.is_dir() else None,
    )
    plan = EvalPlan(cfg, runs, manifest, like, like_has_manifest=old_manifest is not None)
    if like is not None:
        plan.differences = differences(old_manifest, manifest) if old_manifest else []
        manifest["like"] = {"run_dir": str(like), "differences": summarize(plan.differences)}
    return plan
