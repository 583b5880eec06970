"""Assemble an evaluation's manifest from its config and task set.

The sections are what a reader needs to trust and compare a score:

- `model`: name, engine and version, the weights' identity (quick; full on request),
  tokenizer and chat-template hashes (`manifest.model`);
- `agent`: prompt hash, action and observation spaces, screen, images in the
  history and their encoding, sampling and token budget, the protocol and each
  deviation (`manifest.agent`);
- `desktops`: the provider and its image's identity (`manifest.desktops`);
- `tasks`: ids, a hash per task file and per asset, the OSWorld checkout's commit
  (`manifest.tasks`);
- `run`: the code's commit and dirty flag, seeds, runs per task, start and end;
- `config`: the resolved run config, so `cua-rl eval --like` can run it again.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cua_rl.config import RunConfig
from cua_rl.desktop.file_cache import FileCache
from cua_rl.report.manifest.agent import agent_section
from cua_rl.report.manifest.code import code_section, seeds_section
from cua_rl.report.manifest.desktops import desktops_section
from cua_rl.report.manifest.model import model_section
from cua_rl.report.manifest.tasks import tasks_section
from cua_rl.types import TaskVariant

SCHEMA = 1
IDENTITY = ("model", "agent", "desktops", "tasks", "run")
"""Sections that say what ran (compared by `differences`); `config` is how."""


def now_iso() -> str:
    """The current time as ISO 8601 with the UTC offset (what the manifest records)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def build_manifest(
    cfg: RunConfig,
    tasks: Sequence[TaskVariant],
    runs: int,
    cache: FileCache,
    *,
    full_hash: bool = False,
    previous: Mapping[str, Any] | None = None,
    tiny_dir: Path | None = None,
) -> dict[str, Any]:
    """The manifest of evaluating `tasks` `runs` times under `cfg` (nothing is started:
    it reads files, headers and tool versions). `previous` is this run's earlier
    manifest (its asset hashes are reused while the files are unchanged)."""
    return {
        "schema": SCHEMA,
        "kind": "eval",
        "model": model_section(cfg.policy, tiny_dir or cfg.tiny_model_dir, full=full_hash),
        "agent": agent_section(cfg),
        "desktops": desktops_section(cfg.desktops.provider, cfg.desktops.count, full=full_hash),
        "tasks": tasks_section(
            cfg.tasks.source, cfg.tasks.split, tasks, cache, (previous or {}).get("tasks")
        ),
        "run": {
            "code": code_section(),
            "seeds": seeds_section(cfg),
            "runs": runs,
            "full_hash": full_hash,
            "started_at": now_iso(),
            "ended_at": None,
        },
        "config": cfg.model_dump(mode="json"),
    }
