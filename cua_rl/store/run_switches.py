"""The training switches of a run's config that `cua-rl runs show` prints.

Two kinds, both read from the config the run saved (`RunStore.save_config`):
- `OPT_IN`: off by default and off in the paper's preset (`rlanything-osworld`): a
  run that turns one on trains differently from the paper, so `runs show` names the
  ones that are on (key `switches`). A switch is on when its value is set and not
  false;
- `PAPER_VALUES`: the paper's comparisons (a frozen reward model, the outcome weight,
  the two lambdas): listed under `switches` too when the saved value differs from
  the paper's;
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
PAPER_VALUES: dict[str, Any] = {
    "train.prm.enabled": True,
    "train.reward.outcome_weight": 1.0,
    "train.reward.policy_lam": 1.0,
    "train.reward.prm_lam": 1.0,
    "train.lam": 1.0,  # the one lambda of runs stored before the split
}
"""Dotted keys of the paper's comparisons and the paper's value of each
(docs/algorithms.md, "The paper's comparisons as switches")."""
SHOWN: tuple[str, ...] = ("seed", "train.mode", "train.sync.staggered", "metrics.spans")
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
    (`saved_config`) turns on, then of every `PAPER_VALUES` key it holds with another
    value than the paper's (a store without a saved config has none on)."""
    on = {
        key: value
        for key in OPT_IN
        if (value := _lookup(config, key)) is not None and value is not False
    }
    on.update(
        {
            key: value
            for key, paper in PAPER_VALUES.items()
            if (value := _lookup(config, key)) is not None and value != paper
        }
    )
    return on


def shown_settings(config: dict[str, Any]) -> dict[str, Any]:
    """{dotted key: value} of the `SHOWN` keys the saved config (`saved_config`) holds."""
    return {key: value for key in SHOWN if (value := _lookup(config, key)) is not None}
