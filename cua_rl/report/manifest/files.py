"""RUN_DIR/manifest.json: read, written whole (never half), and kept true over a
resumed evaluation.

An evaluation resumed in the same run directory keeps the manifest of its first
invocation (what most of its task runs ran under) and appends one entry per later
invocation that ran something, with what differed then (a new code commit, say).
Resuming with another model is refused: the report would average two models.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cua_rl.atomic_file import write_text_atomic
from cua_rl.errors import RunDirError, naming_path
from cua_rl.report.manifest.build import now_iso
from cua_rl.report.manifest.differences import Difference, differences, summarize

MANIFEST_FILE = "manifest.json"


def read_manifest(run_dir: Path) -> dict[str, Any] | None:
    """The manifest of `run_dir`, or None when it has none (RunDirError naming the
    file when it is not a manifest)."""
    path = run_dir / MANIFEST_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RunDirError(f"{path}: not a readable manifest ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("schema"), int):
        raise RunDirError(
            f"{path}: not a cua-rl manifest (expected a JSON object with an integer `schema`)"
        )
    return data


def write_manifest(run_dir: Path, manifest: Mapping[str, Any]) -> Path:
    """Write the manifest through a temporary file, so a reader never sees half."""
    path = run_dir / MANIFEST_FILE
    with naming_path(path):
        write_text_atomic(path, json.dumps(manifest, indent=2, default=str) + "\n")
    return path


def begin(run_dir: Path, fresh: dict[str, Any]) -> tuple[dict[str, Any], list[Difference]]:
    """The manifest this invocation writes before running: `fresh` for a new run;
    for a resumed one, the stored manifest plus this invocation's entry, and what
    differs from it. RunDirError when the model differs."""
    stored = read_manifest(run_dir)
    if stored is None:
        return fresh, []
    found = differences(stored, fresh)
    model = [d for d in found if d.section == "model"]
    if model:
        raise RunDirError(
            f"{run_dir}: holds an evaluation of another model ("
            + "; ".join(d.describe(40) for d in model[:3])
            + "); resuming would average two models: choose another --out"
        )
    manifest = dict(stored)
    manifest["invocations"] = [
        *stored.get("invocations", []),
        {
            "started_at": fresh["run"]["started_at"],
            "ended_at": None,
            "code": fresh["run"]["code"],
            "differences": summarize(found),
        },
    ]
    return manifest, found


def finish(run_dir: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """Record the end time (of the run and of this invocation) and write."""
    ended = now_iso()
    manifest["run"] = {**manifest["run"], "ended_at": ended}
    if manifest.get("invocations"):
        manifest["invocations"][-1]["ended_at"] = ended
    write_manifest(run_dir, manifest)
    return manifest
