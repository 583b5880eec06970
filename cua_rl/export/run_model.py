"""A kept learner version as a model to serve: `RUN_DIR@VERSION`.

`cua-rl eval --model RUN_DIR@VERSION` (and the override `policy.model=RUN_DIR@VERSION`)
evaluates the policy checkpoint of that version of a train run: it is exported once
(`export model`) to `RUN_DIR/exports/models/policy-vNNNNNN` and that folder is served;
a later evaluation of the same version reuses it. The version must be one the run
kept (`train.policy.keep_every`, `keep_last`, `keep_versions`, pins:
learner/checkpoint_keep.py); `cua-rl export model RUN_DIR --role policy --version N
--out DIR` followed by `--model DIR` is the same thing by hand.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from cua_rl.errors import RunDirError
from cua_rl.export.checkpoint import Role

RUN_VERSION = re.compile(r"(?P<run>.+)@(?P<version>\d+)")
MODEL_KEYS = ("policy.model",)
"""Overrides whose value may name a run's version."""


def parse_run_version(model: str) -> tuple[Path, int] | None:
    """(run dir, version) when `model` is `RUN_DIR@VERSION` with RUN_DIR a train run
    (a folder with config.yaml), else None (a hub id or a folder is served as is)."""
    match = RUN_VERSION.fullmatch(model)
    if match is None:
        return None
    run = Path(match["run"]).expanduser()
    if not (run / "config.yaml").is_file():
        return None
    return run, int(match["version"])


def export_dir(run_dir: Path, version: int, role: Role = "policy") -> Path:
    return run_dir / "exports" / "models" / f"{role}-v{version:06d}"


def version_model_dir(run_dir: Path, version: int, role: Role = "policy") -> Path:
    """The HF folder of `role`'s checkpoint `version` of `run_dir`, exported when it is
    not there yet (a complete earlier export of the same version is reused)."""
    from cua_rl.export.hf_folder import EXPORT_INFO
    from cua_rl.export.model import export_model

    out = export_dir(run_dir, version, role)
    info = _export_info(out / EXPORT_INFO)
    if info is not None:
        if info.get("version") != version or info.get("role") != role:
            raise RunDirError(
                f"{out}: holds {info.get('role')} version {info.get('version')}, "
                f"not {role} version {version}; remove it"
            )
        return out
    export_model(run_dir, role, out, version=version)
    return out


def _export_info(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise RunDirError(f"{path}: not readable JSON ({exc}); remove the folder") from None
    return data if isinstance(data, dict) else None


def _unquoted(value: str) -> str:
    """An override's value as written, or JSON-unquoted (the CLI's flags quote theirs)."""
    if value.startswith('"'):
        try:
            loaded = json.loads(value)
        except ValueError:
            return value
        return loaded if isinstance(loaded, str) else value
    return value


def resolve_overrides(overrides: tuple[str, ...]) -> tuple[tuple[str, ...], list[str]]:
    """`overrides` with every `policy.model=RUN_DIR@VERSION` replaced by the exported
    folder of that version; and one line per replacement (for stderr)."""
    out: list[str] = []
    said: list[str] = []
    for item in overrides:
        key, sep, value = item.partition("=")
        found = parse_run_version(_unquoted(value)) if sep and key in MODEL_KEYS else None
        if found is None:
            out.append(item)
            continue
        folder = version_model_dir(*found)
        out.append(f"{key}={json.dumps(str(folder))}")  # quoted as the CLI's flags are
        said.append(f"{key}: version {found[1]} of {found[0]} -> {folder}")
    return tuple(out), said
