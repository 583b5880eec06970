"""Authoring template/evaluator pairs in any folder, outside the project tree.

An authoring root holds everything a pair needs, laid out like the project's
own (docs/pair-authoring.md):

    templates/<task id>.json              {variant name: instruction}
    evaluators/<task id>/<name>.json      one evaluator spec per variant name
    golden/<domain>/<task id>.json        {variant name: [golden steps]}
    difficulty.json                       {task id: [names, easiest -> hardest]}
    tasks/<domain>/<task id>.json         the base task (setup), optional

A task id is looked up in `tasks/` first, then in the project's local suite, so
a new pair for an existing local task needs no task file. The project itself is
an authoring root whose suite, goldens and difficulty live in
`cua_rl/tasks/data/local/`.

`scaffold_pair` writes a pair that validates (structurally, and on a desktop
when the task has no setup): a placeholder evaluator on a marker file and a
golden solution that writes it, to be replaced by the real ones.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cua_rl.errors import TaskFormatError
from cua_rl.tasks.pairs import evaluator_path, template_path, write_pair
from cua_rl.tasks.schema import Problem, child, type_name
from cua_rl.tasks.sources import DATA_ROOT, LOCAL_SUITE

TASK_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
"""Task ids become file names: no slash, no leading dot."""
DOMAIN = re.compile(r"^[a-z0-9_]{1,64}$")


@dataclass(frozen=True, slots=True)
class AuthoringRoot:
    """Where an authoring root keeps each kind of file (see module doc)."""

    root: Path
    suite: Path
    """Folder of `<domain>/<task id>.json` base tasks (may not exist)."""
    golden_root: Path
    """`golden/<domain>/<task id>.json` is read under this folder."""
    difficulty: Path

    @classmethod
    def of(cls, root: Path | None) -> AuthoringRoot:
        """The layout of `root`; None or the project checkout means the project's."""
        if root is None or root.resolve() == DATA_ROOT:
            return cls(DATA_ROOT, LOCAL_SUITE, LOCAL_SUITE, LOCAL_SUITE / "difficulty.json")
        root = root.resolve()
        return cls(root, root / "tasks", root, root / "difficulty.json")

    def golden_file(self, domain: str, task_id: str) -> Path:
        return self.golden_root / "golden" / domain / f"{task_id}.json"

    def suites(self) -> list[Path]:
        """Folders a base task is looked up in, in order."""
        return list(dict.fromkeys(p for p in (self.suite, LOCAL_SUITE) if p.is_dir()))

    def suites_text(self) -> str:
        """Where base tasks are looked up, for messages (existing or not)."""
        return " or ".join(str(p) for p in dict.fromkeys((self.suite, LOCAL_SUITE)))


def read_difficulty(path: Path) -> tuple[dict[str, Any], list[Problem]]:
    """`{task id: [names] | {"order": [names], ...}}` and its shape problems."""
    if not path.is_file():
        return {}, []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        return {}, [Problem(str(path), "$", f"valid JSON ({exc})")]
    if not isinstance(data, dict):
        return {}, [
            Problem(str(path), "$", f"an object of task id -> names, got {type_name(data)}")
        ]
    return data, []


def difficulty_problems(path: Path, pairs: dict[str, Sequence[str]]) -> list[Problem]:
    """Each pair's entry must list exactly its variant names (the selector orders
    variants by it); entries for tasks without a pair under this root are fine
    (a difficulty file may cover more tasks than one validation run checks)."""
    data, problems = read_difficulty(path)
    if problems or not data and not path.is_file():
        return problems
    for task_id, names in pairs.items():
        at = child("$", task_id)
        entry = data.get(task_id)
        order = entry.get("order") if isinstance(entry, dict) else entry
        if entry is None:
            problems.append(
                Problem(
                    str(path),
                    at,
                    f"an entry for task {task_id} listing its "
                    f"variants easiest first: {sorted(names)}",
                )
            )
        elif not isinstance(order, list) or not all(isinstance(n, str) for n in order):
            problems.append(
                Problem(
                    str(path),
                    at,
                    "an array of variant names (or an object "
                    "with 'order'), got " + type_name(entry),
                )
            )
        elif sorted(order) != sorted(names) or len(set(order)) != len(order):
            problems.append(
                Problem(str(path), at, f"exactly the template's names {sorted(names)}, got {order}")
            )
    return problems


def find_base_task(layout: AuthoringRoot, task_id: str) -> Path | None:
    """The base task file `<suite>/<domain>/<task id>.json`, or None."""
    for suite in layout.suites():
        hits = sorted(suite.glob(f"*/{task_id}.json"))
        hits = [h for h in hits if h.parent.name != "golden"]
        if hits:
            return hits[0]
    return None


def golden_problems(layout: AuthoringRoot, task_id: str, names: Sequence[str]) -> list[Problem]:
    """The pair's golden file, when the task is known, must read and name every variant."""
    from cua_rl.tasks.golden_files import check_golden_step

    task_file = find_base_task(layout, task_id)
    if task_file is None:
        return [
            Problem(
                str(template_path(layout.root, task_id)),
                "$",
                f"a base task <domain>/{task_id}.json under {layout.suites_text()}",
            )
        ]
    golden = layout.golden_file(task_file.parent.name, task_id)
    if not golden.is_file():
        return [
            Problem(
                str(golden),
                "$",
                f"a golden solution file for task {task_id} (variants {sorted(names)})",
            )
        ]
    try:
        data = json.loads(golden.read_text(encoding="utf-8"))
    except ValueError as exc:
        return [Problem(str(golden), "$", f"valid JSON ({exc})")]
    if not isinstance(data, dict):
        return [
            Problem(str(golden), "$", f"an object of variant name -> steps, got {type_name(data)}")
        ]
    problems = [
        Problem(str(golden), child("$", n), "golden steps for this variant")
        for n in names
        if n not in data
    ]
    for name, steps in data.items():
        if not isinstance(steps, list):
            problems.append(Problem(str(golden), child("$", name), "an array of steps"))
            continue
        for i, step in enumerate(steps):
            try:
                check_golden_step(step, "")
            except TaskFormatError as exc:
                text = str(exc).lstrip(": ").removeprefix("expected ")
                problems.append(Problem(str(golden), child(child("$", name), i), text))
    return problems


PLACEHOLDER_NAME = "default"


def _placeholder(task_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """An evaluator on a marker file and the golden steps that satisfy it."""
    marker = f"/tmp/{task_id}.done"
    evaluator = {
        "_comment": "placeholder: replace with the real check (cua-rl templates validate)",
        "func": "exact_match",
        "result": {
            "type": "vm_command_line",
            "command": f"cat {marker} 2>/dev/null || true",
            "shell": True,
        },
        "expected": {"type": "rule", "rules": {"expected": "done\n"}},
    }
    golden = [{"execute": {"command": f"echo done > {marker}", "shell": True}}]
    return evaluator, golden


def scaffold_pair(
    root: Path, task_id: str, domain: str = "os", instruction: str | None = None
) -> list[Path]:
    """Write a new pair for `task_id` under `root` (template, evaluator, golden
    stub, difficulty entry, and a base task file when the id is not a known
    task); refuses to overwrite any of them."""
    if not TASK_ID.match(task_id):
        raise TaskFormatError(
            f"task id {task_id!r}: expected letters, digits, '_', '.' or '-' "
            "(it becomes a file name)"
        )
    if not DOMAIN.match(domain):
        raise TaskFormatError(f"domain {domain!r}: expected lower-case letters, digits or '_'")
    layout = AuthoringRoot.of(root)
    template = template_path(layout.root, task_id)
    if template.exists() or evaluator_path(layout.root, task_id, PLACEHOLDER_NAME).exists():
        raise TaskFormatError(f"{template}: a pair for task {task_id} exists already")
    evaluator, golden = _placeholder(task_id)
    base = find_base_task(layout, task_id)
    task: dict[str, Any] | None = None
    if base is None:
        base = layout.suite / domain / f"{task_id}.json"
        instruction = instruction or f"TODO: say what task {task_id} asks"
        task = {
            "id": task_id,
            "snapshot": domain,
            "instruction": instruction,
            "source": "cua-rl templates new",
            "config": [],
            "related_apps": [],
            "evaluator": evaluator,
        }
    else:  # an existing task: its own evaluator is the first variant; the golden is to write
        domain = base.parent.name
        known = json.loads(base.read_text(encoding="utf-8"))
        instruction = instruction or known.get("instruction")
        evaluator, golden = known.get("evaluator", evaluator), []
    golden_file = layout.golden_file(domain, task_id)
    if golden_file.exists():
        raise TaskFormatError(f"{golden_file}: a golden solution for task {task_id} exists already")
    data, problems = read_difficulty(layout.difficulty)
    if problems:
        raise TaskFormatError(str(problems[0]))
    written: list[Path] = []
    if task is not None:
        base.parent.mkdir(parents=True, exist_ok=True)
        base.write_text(json.dumps(task, indent=2) + "\n", encoding="utf-8")
        written.append(base)
    written += write_pair(
        layout.root, task_id, {PLACEHOLDER_NAME: str(instruction)}, {PLACEHOLDER_NAME: evaluator}
    )
    golden_file.parent.mkdir(parents=True, exist_ok=True)
    golden_file.write_text(
        json.dumps({PLACEHOLDER_NAME: golden}, indent=2) + "\n", encoding="utf-8"
    )
    written.append(golden_file)
    data[task_id] = [PLACEHOLDER_NAME]
    layout.difficulty.parent.mkdir(parents=True, exist_ok=True)
    layout.difficulty.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    written.append(layout.difficulty)
    return written


def authoring_groups(layout: AuthoringRoot, task_ids: Sequence[str] | None = None) -> list[Any]:
    """(base task, variants) of the tasks to check on a desktop: for the project,
    its local suite (all tasks, or `task_ids`); for another root, its pairs and
    its own tasks (or `task_ids`), base tasks found as `find_base_task` does.
    Malformed tasks or pairs raise TaskFormatError."""
    from cua_rl.tasks.check_jobs import suite_groups
    from cua_rl.tasks.osworld import index_tasks, load_task_file
    from cua_rl.tasks.pairs import load_variants, pair_task_ids

    if layout.root == DATA_ROOT:
        return suite_groups(LOCAL_SUITE, DATA_ROOT, task_ids)
    if task_ids is None:
        own = index_tasks(layout.suite) if layout.suite.is_dir() else {}
        task_ids = sorted(set(pair_task_ids(layout.root)) | set(own))
    groups, missing = [], []
    for task_id in task_ids:
        file = find_base_task(layout, task_id)
        if file is None:
            missing.append(task_id)
            continue
        task = load_task_file(file)
        if task is not None:
            groups.append((task, load_variants(task, layout.root)))
    if missing:
        raise TaskFormatError(
            f"no base task for {', '.join(missing)} under "
            f"{layout.suites_text()} (expected <domain>/<task id>.json)"
        )
    return groups
