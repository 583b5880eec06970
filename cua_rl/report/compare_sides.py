"""One side of `cua-rl runs compare`: the per-task run scores of an evaluation, from
our run directory or from an OSWorld results folder (ours or anyone's published
one), with its manifest when it has one.

A run directory's scores are the report's (task runs of evaluation groups that
finished or hit the step limit, runs beyond its `--runs` left out); an OSWorld
folder's are what OSWorld's show_result.py would count (folders with a
result.txt), of exactly one model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cua_rl.errors import RunDirError
from cua_rl.report.eval_report import records_from_store
from cua_rl.report.manifest.files import read_manifest
from cua_rl.store.run_store import DB_NAME, RunStore
from cua_rl.tasks.osworld_results import is_results_folder, read_results


@dataclass
class Side:
    path: Path
    kind: str
    """`cua-rl eval` or `OSWorld results folder`."""
    model: str
    scores: dict[str, list[float]]
    """Task id -> its scored runs' scores (in run order)."""
    domains: dict[str, str]
    manifest: dict[str, Any] | None = None
    problems: list[str] = field(default_factory=list)

    def mean(self, task_id: str) -> float:
        runs = self.scores[task_id]
        return sum(runs) / len(runs)

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "kind": self.kind,
            "model": self.model,
            "tasks_scored": len(self.scores),
            "has_manifest": self.manifest is not None,
            "problems": self.problems[:20],
        }


def _from_run_dir(path: Path) -> Side:
    manifest = read_manifest(path)
    runs = (manifest or {}).get("run", {}).get("runs")
    store = RunStore.read_only(path)
    try:
        records = records_from_store(store)
    finally:
        store.close()
    if not records:
        raise RunDirError(
            f"{path}: no scored evaluation task run; is this a `cua-rl eval` run directory?"
        )
    by_task: dict[str, dict[int, float]] = {}
    domains: dict[str, str] = {}
    for r in records:
        if runs is None or r.run_index < runs:
            by_task.setdefault(r.task_id, {}).setdefault(r.run_index, r.score)
            domains[r.task_id] = r.domain
    model = str(((manifest or {}).get("model") or {}).get("name") or path.name)
    return Side(
        path,
        "cua-rl eval",
        model,
        {t: [s for _, s in sorted(runs_.items())] for t, runs_ in by_task.items()},
        domains,
        manifest,
    )


def _from_results_folder(path: Path) -> Side:
    folder = read_results(path)
    models = folder.models
    if len(models) != 1:
        raise RunDirError(
            f"{path}: holds the results of {len(models)} models "
            f"({', '.join(models[:5])}); give one model's folder"
        )
    scores = {t: [s for _, s in sorted(runs.items())] for t, runs in folder.scores().items()}
    if not scores:
        raise RunDirError(
            f"{path}: no task folder with a result.txt (OSWorld's layout: "
            "<action_space>/<observation_type>/<model>/<domain>/<task_id>/)"
        )
    return Side(
        path, "OSWorld results folder", models[0], scores, folder.domains(), None, folder.problems
    )


def load_side(path: Path) -> Side:
    """An evaluation run directory, or an OSWorld results folder (RunDirError when
    `path` is neither)."""
    if (path / DB_NAME).is_file():
        return _from_run_dir(path)
    if is_results_folder(path):
        return _from_results_folder(path)
    raise RunDirError(
        f"{path}: neither a `cua-rl eval` run directory ({DB_NAME}) nor an "
        "OSWorld results folder (<domain>/<task_id>/result.txt)"
    )
