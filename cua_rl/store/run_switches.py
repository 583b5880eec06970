"""Which opt-in training switches a run had on, read from the config it saved.

Each switch listed here is off by default and off in the paper's preset
(`rlanything-osworld`): a run that turns one on trains differently from the paper,
so `cua-rl runs show` names it (key `switches`). A switch is on when its value is
set and not false. Add a switch's dotted key here when it is added to the config.
"""

from __future__ import annotations

import json
from typing import Any

OPT_IN = (
    "train.policy.entropy_top_fraction",
    "train.prm.entropy_top_fraction",
    "train.replay.enabled",
)
"""Dotted keys of the opt-in switches (docs/algorithms.md describes each)."""


def switches_on(config_json: str | None) -> dict[str, Any]:
    """{dotted key: value} of every switch of `OPT_IN` that the saved config turns on
    (a store without a saved config has none on)."""
    try:
        config = json.loads(config_json or "{}")
    except json.JSONDecodeError:
        return {}
    out: dict[str, Any] = {}
    for key in OPT_IN:
        value: Any = config
        for part in key.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if value is not None and value is not False:
            out[key] = value
    return out
