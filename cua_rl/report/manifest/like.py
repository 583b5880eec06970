"""`cua-rl eval --like RUN_DIR`: the config and run count of an earlier evaluation,
to run it again under the same manifest.

The config is the resolved one the earlier run recorded (its manifest's `config`,
else the run store's saved config), so the protocol and any deviation it had
come back as they were; overrides given now apply on top and show up among the
differences. What cannot be made the same (the model's files, the code, the
image, the tasks) is named by comparing the two manifests
(`manifest.differences`); scores are not expected to be bitwise equal even with
no difference, since a model server's batching and a desktop's timing vary.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cua_rl.config import RunConfig, apply_override, describe_validation_error
from cua_rl.errors import ConfigError, RunDirError
from cua_rl.report.manifest.files import read_manifest
from cua_rl.store.run_store import DB_NAME, RunStore


def recorded_config(run_dir: Path) -> tuple[dict[str, Any], int | None, dict[str, Any] | None]:
    """(config, runs per task, manifest) an earlier evaluation recorded."""
    manifest = read_manifest(run_dir)
    if manifest is not None and isinstance(manifest.get("config"), dict):
        return manifest["config"], (manifest.get("run") or {}).get("runs"), manifest
    if not (run_dir / DB_NAME).is_file():
        raise RunDirError(
            f"{run_dir}: neither manifest.json nor {DB_NAME}; not an evaluation run directory"
        )
    store = RunStore.read_only(run_dir)
    try:
        data = json.loads(store.saved_config())
    finally:
        store.close()
    if not data:
        raise RunDirError(f"{run_dir}: the run recorded no config to run again")
    return data, None, manifest


def like_config(
    run_dir: Path, overrides: tuple[str, ...]
) -> tuple[RunConfig, int | None, dict[str, Any] | None]:
    """The RunConfig of `run_dir`'s evaluation with `overrides` on top, its runs per
    task and its manifest (None for a run made before manifests)."""
    data, runs, manifest = recorded_config(run_dir)
    for override in overrides:
        apply_override(data, override)
    try:
        cfg = RunConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(
            f"{run_dir} (recorded config) + overrides: {describe_validation_error(exc, RunConfig)}"
        ) from None
    return cfg, runs, manifest
