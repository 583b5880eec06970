"""Load OSWorld task files (`examples/<domain>/<id>.json`) into `TaskVariant`s.

The user's OSWorld checkout is read in place, never copied: `examples_dir`
accepts the checkout root or its `evaluation_examples` folder. Loading never
stops at the first bad file: `TaskLoad` carries every task that parsed, every
`Problem` and, per task, the metric/getter names the evaluation registry does
not implement yet. `TaskLoad.raise_for_problems` is what a run calls so that it
does not start with a malformed task (docs/architecture.md, failure rules); unimplemented names
are a coverage gap, reported but not fatal.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cua_rl.errors import TaskFormatError
from cua_rl.tasks.schema import (
    Checks,
    Problem,
    check_evaluator,
    check_setup_steps,
    child,
    read_json,
    type_name,
)
from cua_rl.types import TaskVariant

DEFAULT_EVALUATOR = "default"
"""Evaluator name of a task's own `evaluator` (used when it has no template file)."""


@dataclass
class TaskLoad:
    """The outcome of loading many task files."""

    tasks: list[TaskVariant] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    unimplemented: dict[str, list[str]] = field(default_factory=dict)
    """task id -> metric/getter names used by its evaluator that are not registered."""
    names_checked: bool = True
    """False when the evaluation registry was not importable (names unchecked)."""

    def raise_for_problems(self) -> None:
        """Raise one `TaskFormatError` listing every structural problem, if any."""
        if self.problems:
            lines = "\n".join(str(p) for p in self.problems)
            raise TaskFormatError(f"{len(self.problems)} malformed task file(s):\n{lines}")


def examples_dir(path: Path) -> Path:
    """The `evaluation_examples` folder of a checkout given either it or the root."""
    for candidate in (path, path / "evaluation_examples"):
        if (candidate / "examples").is_dir():
            return candidate
    raise TaskFormatError(
        f"{path}: expected an OSWorld checkout (containing evaluation_examples/examples/) "
        "or its evaluation_examples folder (containing examples/<domain>/<id>.json)"
    )


def index_tasks(tasks_dir: Path) -> dict[str, Path]:
    """Task id -> file for every `<domain>/<id>.json` under a folder of domains."""
    return {f.stem: f for f in sorted(tasks_dir.glob("*/*.json"))}


def check_task(data: Any, file: Path) -> Checks:
    """Check the fields the runner reads; `data` is the parsed task JSON."""
    where = str(file)
    checks = Checks()
    problems = checks.problems
    if not isinstance(data, dict):
        problems.append(Problem(where, "$", f"a task object, got {type_name(data)}"))
        return checks
    for key in ("id", "instruction"):
        value = data.get(key)
        if key not in data:
            problems.append(Problem(where, child("$", key), f"a string (key {key!r} is missing)"))
        elif not isinstance(value, str) or not value.strip():
            problems.append(
                Problem(where, child("$", key), f"a non-empty string, got {type_name(value)}")
            )
    if isinstance(data.get("id"), str) and data["id"] and data["id"] != file.stem:
        problems.append(
            Problem(where, "$.id", f"the file name's id {file.stem!r}, got {data['id']!r}")
        )
    if "snapshot" in data and not isinstance(data["snapshot"], str):
        problems.append(
            Problem(where, "$.snapshot", f"a string, got {type_name(data['snapshot'])}")
        )
    apps = data.get("related_apps", [])
    if not isinstance(apps, list) or not all(isinstance(a, str) for a in apps):
        problems.append(Problem(where, "$.related_apps", "an array of app names (strings)"))
    # `config` is optional in OSWorld (an infeasible task has none): absent = no setup.
    if "config" in data:
        checks.extend(check_setup_steps(data["config"], where, "$.config"))
    if "step_progress" in data:
        problem = step_progress_problem(data["step_progress"])
        if problem:
            problems.append(Problem(where, "$.step_progress", problem))
    if "evaluator" not in data:
        problems.append(Problem(where, "$.evaluator", "an evaluator object (key is missing)"))
    else:
        checks.extend(check_evaluator(data["evaluator"], where, "$.evaluator"))
    return checks


def step_progress_problem(spec: Any) -> str | None:
    """What a task's `step_progress` probe was expected to be (None: it is): an object
    with a `command` (an array of strings, or a shell line with `shell: true`)."""
    if not isinstance(spec, dict) or set(spec) - {"command", "shell"}:
        return f'an object with "command" and optionally "shell", got {type_name(spec)}'
    command, shell = spec.get("command"), spec.get("shell", False)
    if not isinstance(shell, bool):
        return f'"shell" as true or false, got {type_name(shell)}'
    if shell and isinstance(command, str) and command.strip():
        return None
    if isinstance(command, list) and command and all(isinstance(c, str) for c in command):
        return None
    return '"command" as a non-empty array of strings (or a string with "shell": true)'


def task_from_json(data: dict[str, Any], file: Path, domain: str) -> TaskVariant:
    """Build the task's own variant from JSON that `check_task` accepted."""
    return TaskVariant(
        task_id=data["id"],
        domain=domain,
        evaluator_name=DEFAULT_EVALUATOR,
        instruction=data["instruction"],
        config=tuple(data.get("config", ())),
        evaluator=data["evaluator"],
        related_apps=tuple(data.get("related_apps", ())),
        snapshot=data.get("snapshot", ""),
        source_path=str(file),
        step_progress=data.get("step_progress"),
    )


def load_task_file(file: Path, into: TaskLoad | None = None) -> TaskVariant | None:
    """Load one task file. Without `into`, any problem raises `TaskFormatError`;
    with it, problems and unimplemented names are recorded there instead."""
    load = into if into is not None else TaskLoad()
    try:
        data = read_json(file)
    except TaskFormatError as exc:
        load.problems.append(Problem.from_line(str(file), "$", str(exc)))
        data, checks = None, None
    else:
        checks = check_task(data, file)
        load.problems += checks.problems
        load.names_checked = load.names_checked and checks.deep
    task = None
    if checks is not None and not checks.problems:
        task = task_from_json(data, file, domain=file.parent.name)
        if checks.unimplemented:
            load.unimplemented[task.task_id] = checks.unimplemented
        load.tasks.append(task)
    if into is None:
        load.raise_for_problems()
    return task


def load_tasks(
    tasks_dir: Path, ids: Iterable[str] | None = None, ids_source: str = "split"
) -> TaskLoad:
    """Load the tasks under a folder of domains (all of them, or `ids` in order)."""
    index = index_tasks(tasks_dir)
    load = TaskLoad()
    if ids is None:
        files = list(index.values())
    else:
        files = []
        for task_id in ids:
            if task_id in index:
                files.append(index[task_id])
            else:
                load.problems.append(
                    Problem(
                        ids_source,
                        "$",
                        f"task id {task_id!r} to exist as {tasks_dir}/<domain>/{task_id}.json",
                    )
                )
    for file in files:
        load_task_file(file, into=load)
    return load


def load_osworld(
    path: Path, ids: Iterable[str] | None = None, ids_source: str = "split"
) -> TaskLoad:
    """Load tasks from an OSWorld checkout (root or evaluation_examples folder)."""
    return load_tasks(examples_dir(path) / "examples", ids, ids_source)


def read_test_split(path: Path, name: str) -> list[str]:
    """Task ids of one of the checkout's own split files, e.g. `test_all`."""
    file = examples_dir(path) / f"{name.removesuffix('.json')}.json"
    return ids_from_domain_map(read_json(file), str(file))


def ids_from_domain_map(data: Any, where: str) -> list[str]:
    """Ids from OSWorld's split format `{domain: [id, ...]}`, in file order."""
    if not isinstance(data, dict):
        raise TaskFormatError(
            f"{where}: $: expected an object of domain -> array of task ids, got {type_name(data)}"
        )
    ids: list[str] = []
    for domain, items in data.items():
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            raise TaskFormatError(f"{where}: {child('$', domain)}: expected an array of task ids")
        ids += items
    return ids
