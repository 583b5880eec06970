"""Shape checks for task, template and evaluator JSON, reported as `Problem` lines.

Checks here cover exactly what the runner reads. Deeper checks belong to the
modules that own the semantics and are called through their public functions:
evaluator specs to `cua_rl.evaluation.registry.check_evaluator_spec`, setup steps
to `cua_rl.desktop.setup_steps.validate_setup_steps`. Both are imported lazily
so that this module works (with shallower checks) before they exist; the
`Checks.deep` flag says which happened. A spec is only handed on once its own
shape is right, so each mistake yields exactly one line.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cua_rl.errors import TaskFormatError

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True, slots=True)
class Problem:
    """One malformed spot: the file, the JSON path in it, and what was expected."""

    file: str
    json_path: str
    expected: str
    verbatim: bool = False
    """`expected` is another checker's full message (kept as written)."""

    def __str__(self) -> str:
        what = self.expected if self.verbatim else f"expected {self.expected}"
        return f"{self.file}: {self.json_path}: {what}"

    @classmethod
    def from_line(cls, file: str, json_path: str, line: str) -> Problem:
        """Wrap a message from another module's checker, which was given
        `where = f"{file}: {json_path}"` and usually repeats it as a prefix."""
        prefix = f"{file}: "
        if line.startswith(prefix + "$"):
            path, sep, expected = line[len(prefix) :].partition(": ")
            if sep:
                return cls(file, path, expected, verbatim=True)
        return cls(file, json_path, line, verbatim=True)


@dataclass
class Checks:
    """Problems found in one file plus metric/getter names not implemented yet."""

    problems: list[Problem] = field(default_factory=list)
    unimplemented: list[str] = field(default_factory=list)
    deep: bool = True
    """False when a delegated checker was not importable (shape-only checks)."""

    def extend(self, other: Checks) -> None:
        self.problems += other.problems
        self.unimplemented += [n for n in other.unimplemented if n not in self.unimplemented]
        self.deep = self.deep and other.deep


def child(path: str, key: str | int) -> str:
    """JSON path of a member: `$.a`, `$[0]`, `$["odd key"]`."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if _IDENTIFIER.match(key) else f"{path}[{json.dumps(key)}]"


def type_name(value: Any) -> str:
    """JSON's name for a Python value's type, for 'expected X, got Y' messages."""
    names = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), "number" if isinstance(value, int | float) else "?")


def read_json(path: Path) -> Any:
    """Parse a JSON file; a syntax error names the file, line and column."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskFormatError(f"{path}: $: expected a readable UTF-8 JSON file ({exc})") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise TaskFormatError(
            f"{path}: $: expected valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from exc


def check_evaluator(spec: Any, file: str, path: str = "$") -> Checks:
    """An OSWorld evaluator spec: an object whose `func` is a metric name or a list."""
    checks = Checks()
    if not isinstance(spec, dict):
        checks.problems.append(Problem(file, path, f"an evaluator object, got {type_name(spec)}"))
        return checks
    func = spec.get("func")
    func_path = child(path, "func")
    if "func" not in spec:
        checks.problems.append(Problem(file, func_path, "a metric name (key 'func' is missing)"))
    elif isinstance(func, list):
        if not func:
            checks.problems.append(Problem(file, func_path, "a non-empty array of metric names"))
        for i, name in enumerate(func):
            if not isinstance(name, str) or not name:
                checks.problems.append(
                    Problem(file, child(func_path, i), f"a metric name, got {type_name(name)}")
                )
    elif not isinstance(func, str) or not func:
        checks.problems.append(
            Problem(file, func_path, f"a metric name or an array of them, got {type_name(func)}")
        )
    if checks.problems:
        return checks
    if "postconfig" in spec:
        checks.extend(check_setup_steps(spec["postconfig"], file, child(path, "postconfig")))
    check_spec = _evaluator_spec_checker()
    if check_spec is None:
        checks.deep = False
        return checks
    where = f"{file}: {path}"
    report = check_spec(spec, where)
    # postconfig was checked step by step above; skip the registry's coarser line
    errors = [e for e in report.errors if not e.startswith(f"{where}.postconfig:")]
    checks.problems += [Problem.from_line(file, path, e) for e in errors]
    checks.unimplemented += list(report.unimplemented)
    return checks


def check_setup_steps(steps: Any, file: str, path: str) -> Checks:
    """OSWorld `config`/`postconfig` steps: an array of `{type, parameters}` objects.

    A step type the desktop layer does not implement yet (e.g. `chrome_open_tabs`)
    is a coverage gap like an unimplemented metric: listed as `step:<type>` in
    `unimplemented`, not reported as a malformed file.
    """
    checks = Checks()
    if not isinstance(steps, list):
        checks.problems.append(
            Problem(file, path, f"an array of setup steps, got {type_name(steps)}")
        )
        return checks
    found = _setup_step_validator()
    if found is not None:
        validate, known = found
        where = f"{file}: {path}"
        gaps = {
            i: step["type"]
            for i, step in enumerate(steps)
            if isinstance(step, dict)
            and isinstance(step.get("type"), str)
            and step["type"] not in known
        }
        checks.unimplemented += list(dict.fromkeys(f"step:{t}" for t in gaps.values()))
        gap_prefixes = tuple(f"{where}[{i}]:" for i in gaps)
        for line in validate(steps, where=where):
            if not (gap_prefixes and line.startswith(gap_prefixes)):
                checks.problems.append(Problem.from_line(file, path, line))
        return checks
    checks.deep = False
    for i, step in enumerate(steps):
        step_path = child(path, i)
        if not isinstance(step, dict):
            checks.problems.append(
                Problem(file, step_path, f"a step object, got {type_name(step)}")
            )
        elif not isinstance(step.get("type"), str):
            checks.problems.append(Problem(file, child(step_path, "type"), "a step type name"))
        elif not isinstance(step.get("parameters", {}), dict):
            checks.problems.append(Problem(file, child(step_path, "parameters"), "an object"))
    return checks


def locate_name(spec: Any, name: str, path: str = "$") -> str:
    """JSON path where an unimplemented metric/getter/step name is used (for messages).

    Names come as the registry reports them (`compare_table`, `compare_table(rules)`)
    or as `step:<type>`; we look for the bare name as a `func` or `type` value
    and fall back to `path`.
    """
    bare = name.removeprefix("step:").split("(", 1)[0]

    def walk(value: Any, at: str) -> str | None:
        if isinstance(value, dict):
            for key, item in value.items():
                if key in ("func", "type") and item == bare:
                    return child(at, key)
                if key == "func" and isinstance(item, list) and bare in item:
                    return child(child(at, key), item.index(bare))
                found = walk(item, child(at, key))
                if found:
                    return found
        elif isinstance(value, list):
            for i, item in enumerate(value):
                found = walk(item, child(at, i))
                if found:
                    return found
        return None

    return walk(spec, path) or path


def _evaluator_spec_checker():  # -> Callable[[dict, str], SpecReport] | None
    try:
        from cua_rl.evaluation.registry import check_evaluator_spec
    except ModuleNotFoundError as exc:
        if exc.name not in ("cua_rl.evaluation", "cua_rl.evaluation.registry"):
            raise
        return None
    return check_evaluator_spec


def _setup_step_validator():  # -> (Callable[..., list[str]], Container[str]) | None
    try:
        from cua_rl.desktop.setup_steps import SETUP_STEPS, validate_setup_steps
    except ModuleNotFoundError as exc:
        if exc.name != "cua_rl.desktop.setup_steps":
            raise
        return None
    return validate_setup_steps, SETUP_STEPS
