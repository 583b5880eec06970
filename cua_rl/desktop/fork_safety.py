"""Which task setups may be done once and forked to a group's rollouts.

A fork gives every rollout of a group the state one setup left, byte for byte. That
equals a fresh setup only when the setup is deterministic: a setup that writes the
time, draws random names or loads live web pages would give each fresh setup its own
state, so forking it would hand the group a sameness a real run never has, and a
task's evaluator could read it. Such tasks are set up per rollout, as without forks.

The check reads the task's setup steps (its `config`) only; `setup_not_forkable`
names the first reason found, or None. It errs toward "not forkable": a command that
merely mentions `date` is set up per rollout, which costs time, never correctness.
`NOT_FORKABLE_TASKS` lists tasks known to need a fresh setup that the rules miss.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

NONDETERMINISTIC = (
    (
        re.compile(r"\bdate\b|\bnow\(|\btime\.time|\bdatetime\b|\blocaltime\b|\bstrftime\b"),
        "reads the clock",
    ),
    (
        re.compile(r"\$RANDOM|\bmktemp\b|\buuid|\brandom\b|\bshuf\b|/dev/u?random|\bsecrets\b"),
        "draws random values",
    ),
)
"""Patterns in a setup command and what they mean for a fork."""
LIVE_WEB = re.compile(r"https?://(?!localhost|127\.)", re.IGNORECASE)
"""A page from the web opened by the setup: each load may differ (ads, feeds, time)."""
OPENS_PAGES = frozenset({"chrome_open_tabs", "launch", "open", "command", "execute"})
NOT_FORKABLE_TASKS: Mapping[str, str] = {}
"""Task id -> why its setup must run per rollout, where the rules above cannot tell."""


def setup_not_forkable(task_id: str, config: Sequence[Mapping[str, Any]]) -> str | None:
    """Why this task's setup must run per rollout, or None when one setup may be
    forked to the whole group."""
    if task_id in NOT_FORKABLE_TASKS:
        return NOT_FORKABLE_TASKS[task_id]
    for index, step in enumerate(config):
        kind = str(step.get("type", ""))
        text = json.dumps(step.get("parameters", {}), sort_keys=True)
        if kind == "chrome_open_tabs" or (
            kind in OPENS_PAGES and kind != "execute" and LIVE_WEB.search(text)
        ):
            return f"config[{index}] ({kind}) opens live web pages"
        if kind in ("execute", "command", "launch", "execute_with_verification"):
            for pattern, meaning in NONDETERMINISTIC:
                if pattern.search(text):
                    return f"config[{index}] ({kind}) {meaning}"
    return None
