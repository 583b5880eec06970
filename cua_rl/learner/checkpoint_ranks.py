"""Which rank count wrote a learner checkpoint, and the check made before resuming it.

ZeRO state is sharded per rank (DeepSpeed writes one optimizer, and under ZeRO-3
one parameter, file per rank), so a checkpoint resumes only on the number of
ranks that saved it. Rank 0 writes `ranks.json` beside the engine's state; a
learner about to load a checkpoint made by a different number stops with one
line that names the checkpoint, both numbers and the setting to change, instead
of DeepSpeed's error from deep inside the load. A checkpoint without the file
was written by one process (the torch engine, or DeepSpeed before ranks existed).
"""

from __future__ import annotations

import json
from pathlib import Path

from cua_rl.errors import ConfigError

RANKS_FILE = "ranks.json"


def write_ranks(path: str | Path, ranks: int, engine: str, zero_stage: int | None) -> None:
    """Record who wrote the checkpoint in `path` (rank 0 only)."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    (path / RANKS_FILE).write_text(
        json.dumps({"ranks": ranks, "engine": engine, "zero_stage": zero_stage})
    )


def saved_ranks(path: str | Path) -> int:
    """The rank count of the checkpoint in `path` (1 without a `ranks.json`)."""
    file = Path(path) / RANKS_FILE
    if not file.is_file():
        return 1
    try:
        ranks = json.loads(file.read_text())["ranks"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{file}: expected JSON with an integer 'ranks' ({exc})") from None
    if not isinstance(ranks, int) or ranks < 1:
        raise ConfigError(f"{file}: 'ranks' must be an integer >= 1, got {ranks!r}")
    return ranks


def check_ranks(path: str | Path, ranks: int) -> None:
    """Raise `ConfigError` unless the checkpoint in `path` was saved by `ranks` ranks."""
    saved = saved_ranks(path)
    if saved != ranks:
        raise ConfigError(
            f"checkpoint {path} was saved by {saved} learner rank(s) but this run has "
            f"{ranks}: resume with the same number (set train.policy.ranks / "
            f"train.prm.ranks to {saved})"
        )
