"""Golden solution files: `<golden root>/golden/<domain>/<task id>.json`, each
{variant name: [step, ...]} (steps: `pyautogui`, `execute`, `sleep`; see
`cua_rl.tasks.on_desktop`, which runs them). They sit outside `<domain>/` because
the task loader reads every `<domain>/*.json` as a task."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cua_rl.desktop.setup_step_params import ExecuteParams
from cua_rl.errors import TaskFormatError
from cua_rl.types import TaskVariant

GOLDEN_DIR = "golden"


def golden_path(task: TaskVariant, golden_root: Path | None = None) -> Path:
    """`<golden root>/golden/<domain>/<id>.json` for a task file `<suite>/<domain>/<id>.json`
    (the golden root is the suite itself unless given)."""
    source = Path(task.source_path)
    base = golden_root if golden_root is not None else source.parent.parent
    return base / GOLDEN_DIR / source.parent.name / f"{task.task_id}.json"


def read_golden(
    task: TaskVariant, golden_root: Path | None = None
) -> dict[str, list[dict[str, Any]]]:
    """Variant name -> golden steps; TaskFormatError naming the file on bad shape."""
    path = golden_path(task, golden_root)
    if not path.is_file():
        raise TaskFormatError(f"{path}: no golden solution file for task {task.task_id}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise TaskFormatError(f"{path}: not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise TaskFormatError(f"{path}: $: expected an object of variant name -> steps")
    for name, steps in data.items():
        if not isinstance(steps, list):
            raise TaskFormatError(f"{path}: $.{name}: expected an array of steps")
        for i, step in enumerate(steps):
            check_golden_step(step, f"{path}: $.{name}[{i}]")
    return data


def check_golden_step(step: Any, where: str) -> None:
    if not isinstance(step, dict) or len(step) != 1:
        raise TaskFormatError(
            f"{where}: expected an object with one key: pyautogui, execute or sleep"
        )
    ((kind, value),) = step.items()
    if kind == "pyautogui" and isinstance(value, str) and value.strip():
        return
    if kind == "sleep" and isinstance(value, int | float) and 0 <= value <= 30:
        return
    if kind == "execute" and isinstance(value, dict):
        try:
            ExecuteParams.model_validate(value)
            return
        except ValidationError as exc:
            raise TaskFormatError(f"{where}: execute: {exc}") from None
    raise TaskFormatError(
        f"{where}: expected pyautogui (code string), execute "
        f"(setup-step parameters) or sleep (0-30 s), got {kind}={value!r:.80}"
    )
