"""`cua-rl export osworld-results RUN_DIR`: an existing evaluation run in OSWorld's
results layout (`cua_rl.report.osworld_layout`), for a run made before `eval`
wrote it or into another folder (a leaderboard submission, say).

The scores come from the run store as the report counts them: task runs of
evaluation groups that finished or hit the step limit, runs beyond the
evaluation's `--runs` left out (its manifest says how many; a run made before
manifests keeps them all).
"""

from __future__ import annotations

import json
from pathlib import Path

from cua_rl.errors import RunDirError
from cua_rl.report.eval_report import build_report, records_from_store
from cua_rl.report.manifest.files import read_manifest
from cua_rl.report.osworld_layout import LAYOUT_DIR, LayoutResult, write_osworld_results
from cua_rl.store.run_store import RunStore


def _model_name(run_dir: Path, store: RunStore, manifest: dict | None) -> str:
    if manifest and (manifest.get("model") or {}).get("name"):
        return str(manifest["model"]["name"])
    try:
        return str(json.loads(store.saved_config())["policy"]["model"])
    except (KeyError, TypeError, ValueError):
        return "model"


def export_osworld_results(
    run_dir: Path, out: Path | None = None, model: str | None = None
) -> LayoutResult:
    """Write RUN_DIR's scored task runs under `out` (default RUN_DIR/osworld-results),
    the model folder named after `model` (default: the evaluated model's name)."""
    manifest = read_manifest(run_dir)
    store = RunStore.read_only(run_dir)
    try:
        records = records_from_store(store)
        if not records:
            raise RunDirError(
                f"{run_dir}: no scored evaluation task run (groups named "
                "<task_id>#<run>); is this a `cua-rl eval` run directory?"
            )
        runs = (manifest or {}).get("run", {}).get("runs")
        report = build_report(records, runs=runs)
        return write_osworld_results(
            store,
            report,
            out or run_dir / LAYOUT_DIR,
            model or _model_name(run_dir, store, manifest),
        )
    finally:
        store.close()
