"""The switches of a run's config that `runs show` prints beside its counts.

A few settings change what the counts mean (e.g. whether weight syncs took replicas
out of routing), so a reader of `runs show` should not have to open `config.yaml` to
know them. They come from the config the run saved (`RunStore.save_config`); a key
the saved config does not hold (a rollout or evaluation run, a run older than the
setting) is left out rather than guessed from today's default.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

SHOWN: tuple[str, ...] = ("train.sync.staggered",)
"""Dotted config keys shown by `runs show`, in order."""


def shown_settings(db: sqlite3.Connection, run_id: str) -> dict[str, Any]:
    """`{dotted key: value}` of the `SHOWN` keys the run's saved config holds."""
    row = db.execute("SELECT config_json FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    try:
        config = json.loads(row[0]) if row else {}
    except ValueError:
        return {}
    out: dict[str, Any] = {}
    for key in SHOWN:
        value: Any = config
        for part in key.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if value is not None:
            out[key] = value
    return out
