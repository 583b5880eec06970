"""A pair folder with one task whose evaluator flips a coin on the desktop: success with
probability `p` whatever the agent did. For runs that must see successes and failures
of one task variant (success replay, per-task budgets) with a model that solves
nothing. `p` = 1 - sqrt(0.5) makes half the groups of two rollouts all-failed."""

from __future__ import annotations

import json
from pathlib import Path

from cua_rl.tasks.authoring import scaffold_pair

COIN_TASK = "coin-flip"
HALF_OF_PAIRS = 0.293
"""P(success) with which a group of 2 rollouts has no success half the time."""


def write_coin_pair(root: Path, p: float = HALF_OF_PAIRS) -> str:
    """A pair folder at `root` with the coin task; returns its task id."""
    scaffold_pair(root, COIN_TASK, instruction="Click anywhere, then finish.")
    command = f"python3 -c \"import random; print('win' if random.random() < {p} else 'lose')\""
    spec = {
        "func": "exact_match",
        "result": {"type": "vm_command_line", "command": command, "shell": True},
        "expected": {"type": "rule", "rules": {"expected": "win\n"}},
    }
    (root / "evaluators" / COIN_TASK / "default.json").write_text(json.dumps(spec, indent=2))
    task_file = root / "tasks" / "os" / f"{COIN_TASK}.json"
    task = json.loads(task_file.read_text())
    task["evaluator"] = spec
    task_file.write_text(json.dumps(task, indent=2))
    return COIN_TASK
