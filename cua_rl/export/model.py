"""`export model`: one learner checkpoint of a run -> one Hugging Face folder.

The base model (config, processor, chat template) is the one the run's learner
started from: `policy.model` / `prm.model` of the run's saved `config.yaml`
(`tiny` meaning the run's tiny-model directory), or `--base-model` when the run
moved to another machine. No hub access: a hub id must be in the local cache.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cua_rl.errors import ConfigError, RunDirError
from cua_rl.export.checkpoint import Role, find_checkpoint, load_weights
from cua_rl.export.hf_folder import check_out, write_hf_folder


def export_model(
    run_dir: Path,
    role: Role,
    out: Path,
    *,
    version: int | None = None,
    base_model: str | None = None,
) -> dict[str, Any]:
    """Write checkpoint `version` (None: the latest) of `role` as an HF folder at `out`;
    returns what was written (run, role, version, checkpoint, engine, dtype, ...)."""
    ckpt = find_checkpoint(run_dir, role, version)
    check_out(out)
    base = base_model or run_base_model(run_dir, role)
    base_dir = local_model_dir(base)
    weights = load_weights(ckpt)
    info = {
        "run": str(run_dir.resolve()),
        "role": role,
        "version": ckpt.version,
        "checkpoint": str(ckpt.path.relative_to(run_dir)),
        "engine": ckpt.engine,
        "base_model": base,
    }
    return {**write_hf_folder(weights, base_dir, out, info), "out": str(out)}


def local_model_dir(model: str) -> Path:
    """A checkpoint directory, or the local hub-cache snapshot of a hub id (never
    downloaded: export must work offline and export what the run trained)."""
    path = Path(model).expanduser()
    if path.is_dir():
        return path
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return Path(snapshot_download(model, local_files_only=True))
    except (LocalEntryNotFoundError, ValueError, OSError):
        raise RunDirError(
            f"base model {model!r}: neither a directory nor in the local "
            "Hugging Face cache; give its checkpoint directory with "
            "--base-model"
        ) from None


def run_base_model(run_dir: Path, role: Role) -> str:
    """The checkpoint directory or hub id `role`'s learner of this run started from."""
    from cua_rl.config import RunConfig, load_config
    from cua_rl.inference.config import TINY
    from cua_rl.inference.launcher import default_tiny_dir

    try:
        cfg = load_config(RunConfig, run_dir / "config.yaml")
    except ConfigError as exc:
        raise RunDirError(
            f"{run_dir}: its config.yaml does not load ({exc}); give the base "
            "model with --base-model"
        ) from None
    servers = cfg.policy if role == "policy" else cfg.prm
    if servers.model == TINY:
        return str(cfg.tiny_model_dir or default_tiny_dir())
    return servers.model
