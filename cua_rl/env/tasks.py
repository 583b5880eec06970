"""Which task an environment's `reset` runs: its task set, `options`, and the seed.

`reset(options={"task": ..., "variant": ...})`: `task` is a task id of the set, a
`TaskVariant`, or an OSWorld task JSON object (OSWorld's `reset(task_config=...)`),
checked as the task loader checks a file; `variant` names one of the task's
evaluator variants (templates/). Without `task`, the one task of the set, or one
drawn with the environment's `np_random` (so a seed fixes the sequence of tasks).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cua_rl.errors import TaskFormatError
from cua_rl.tasks.osworld import check_task, task_from_json
from cua_rl.tasks.sources import DATA_ROOT, load_task_set
from cua_rl.types import TaskVariant

DEFAULT_LOCAL_TASK = "3f721143-4ecd-5578-b3c7-538ff7573b16"
"""The local suite's click-target task (the learning demo's): a tkinter window that
starts in about a second and a one-click golden solution."""
OPTION_KEYS = frozenset({"task", "variant"})


def load_env_tasks(
    source: str, task_id: str | Sequence[str] | None, split: str | None
) -> list[list[TaskVariant]]:
    """Every variant of the tasks in scope, one list per task (its own variant first)."""
    ids = [task_id] if isinstance(task_id, str) else list(task_id or ())
    task_set = load_task_set(source, split, ids, DATA_ROOT)
    if not task_set:
        raise TaskFormatError(f"{source}: no task in scope (split={split!r}, task_id={task_id!r})")
    return task_set


class TaskChoice:
    """Picks the task variant of each reset."""

    def __init__(self, task_set: Sequence[Sequence[TaskVariant]]) -> None:
        if not task_set or not all(task_set):
            raise ValueError("an environment needs at least one task with one variant")
        self.task_set = [list(v) for v in task_set]
        self.by_id = {v[0].task_id: self.task_set[i] for i, v in enumerate(self.task_set)}

    def pick(self, options: dict[str, Any] | None, rng: np.random.Generator) -> TaskVariant:
        options = dict(options or {})
        unknown = sorted(set(options) - OPTION_KEYS)
        if unknown:
            raise ValueError(
                f"reset options: unknown key(s) {unknown}; expected {sorted(OPTION_KEYS)}"
            )
        task = options.get("task")
        if task is None:
            variants = (
                self.task_set[int(rng.integers(len(self.task_set)))]
                if len(self.task_set) > 1
                else self.task_set[0]
            )
        elif isinstance(task, TaskVariant):
            variants = self.by_id.get(task.task_id, [task])
            if "variant" not in options:
                return task
        elif isinstance(task, str):
            if task not in self.by_id:
                raise ValueError(
                    f"reset options: task {task!r} is not in this environment's "
                    f"{len(self.by_id)} task(s); pass its task JSON instead"
                )
            variants = self.by_id[task]
        elif isinstance(task, dict):
            variants = [task_from_options(task)]
        else:
            raise ValueError(
                f"reset options: task must be a task id, a TaskVariant or a "
                f"task JSON object, got {type(task).__name__}"
            )
        name = options.get("variant")
        if name is None:
            return variants[0]
        for variant in variants:
            if variant.evaluator_name == name:
                return variant
        raise ValueError(
            f"reset options: task {variants[0].task_id} has no variant {name!r}; "
            f"it has {[v.evaluator_name for v in variants]}"
        )


def task_from_options(data: dict[str, Any]) -> TaskVariant:
    """An OSWorld task JSON object given to `reset`, checked like a task file."""
    where = Path("reset-options-task") / f"{data.get('id', 'task')}.json"
    checks = check_task(data, where)
    if checks.problems:
        raise TaskFormatError(
            "reset options: task: " + "; ".join(str(p) for p in checks.problems[:5])
        )
    return task_from_json(data, where, domain=str(data.get("snapshot") or "custom"))
