"""The training switches of a run's config that `cua-rl runs show` prints.

Two kinds, both read from the config the run saved (`RunStore.save_config`):
- `OPT_IN`: off by default and off in the paper's preset (`rlanything-osworld`): a
  run that turns one on trains differently from the paper, so `runs show` names the
  ones that are on (key `switches`). A switch is on when its value is set and not
  false;
- `SHOWN`: settings that change what the counts mean (e.g. whether weight syncs took
  replicas out of routing, whether spans of where its time went were recorded under
  RUN_DIR/spans/), printed as they were, at top level. A key the saved
  config does not hold (a rollout or evaluation run, a run older than the setting)
  is left out rather than guessed from today's default.
Add a switch's dotted key here when it is added to the config.
"""

from __future__ import annotations

import json
from typing import Any

OPT_IN = (
    "train.policy.entropy_top_fraction",
    "train.prm.entropy_top_fraction",
    "train.replay.enabled",
    "train.budgets.enabled",
)
"""Dotted keys of the opt-in switches (docs/algorithms.md describes each)."""
SHOWN: tuple[str, ...] = ("train.mode", "train.sync.staggered", "metrics.spans")
"""Dotted keys always shown when the saved config holds them, in order."""


def saved_config(config_json: str | None) -> dict[str, Any]:
    """The config a run saved, as a dict; {} for none or one that does not parse."""
    try:
        config = json.loads(config_json or "{}")
    except ValueError:
        return {}
    return config if isinstance(config, dict) else {}


def _lookup(config: dict[str, Any], key: str) -> Any:
    value: Any = config
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def switches_on(config: dict[str, Any]) -> dict[str, Any]:
    """{dotted key: value} of every switch of `OPT_IN` that the saved config
    (`saved_config`) turns on (a store without a saved config has none on)."""
    return {key: value for key in OPT_IN
            if (value := _lookup(config, key)) is not None and value is not False}


def shown_settings(config: dict[str, Any]) -> dict[str, Any]:
    """{dotted key: value} of the `SHOWN` keys the saved config (`saved_config`) holds."""
    return {key: value for key in SHOWN if (value := _lookup(config, key)) is not None}
