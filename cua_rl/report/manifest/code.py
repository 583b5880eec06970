"""The code that ran an evaluation: the checkout's commit and whether it had changes
not committed (`dirty`), the package version, Python, and the seeds."""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Any

from cua_rl.config import RunConfig
from cua_rl.report.manifest.tasks import git_state
from cua_rl.report.stats import SEED

PACKAGE_ROOT = Path(__file__).resolve().parents[3]
"""The folder holding `cua_rl/` (the git checkout in a development install)."""


def code_section() -> dict[str, Any]:
    """The manifest's `code`: commit and dirty flag (None outside a git checkout)."""
    from importlib import metadata

    try:
        version = metadata.version("cua-rl")
    except metadata.PackageNotFoundError:
        version = None
    git = git_state(PACKAGE_ROOT) if (PACKAGE_ROOT / "cua_rl").is_dir() else None
    return {
        "commit": git["commit"] if git else None,
        "dirty": git["dirty"] if git else None,
        "root": str(PACKAGE_ROOT),
        "version": version,
        "python": platform.python_version(),
    }


def seeds_of(config: dict[str, Any]) -> dict[str, Any]:
    """Every seed the run's config sets (read from the saved config's JSON, so runs
    saved before a key existed read as None), and the report's resampling seed."""
    policy = config.get("policy") or {}
    return {
        "seed": config.get("seed"),
        "policy.vllm.seed": (policy.get("vllm") or {}).get("seed")
        if policy.get("engine") == "vllm"
        else None,
        "report.bootstrap": SEED,
    }


def seeds_section(cfg: RunConfig) -> dict[str, Any]:
    return seeds_of(cfg.model_dump(mode="json"))
