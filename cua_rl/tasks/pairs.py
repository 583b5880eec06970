"""Template/evaluator pairs: the evaluator variants a task can be switched between.

Layout under a root folder (docs/architecture.md, authoring task pairs):

    templates/<task_id>.json              {evaluator name: canonical instruction}
    evaluators/<task_id>/<file name>.json one OSWorld evaluator spec per name

The template file is the source of truth for names. An evaluator's file name is
`evaluator_file_stem(name)`: the name percent-encoded like a URL path segment
(`urllib.parse.quote(name, safe="")`: letters, digits and `_.-~` stay, every
other UTF-8 byte becomes `%XX`, `%` itself included) and a leading `.` written
`%2E`, so no name can become a hidden file, `..` or contain `/`. The mapping is
injective; `evaluator_name_from_stem` (`unquote`) inverts it, which is how an
evaluator file without a template entry is reported by name.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from cua_rl.errors import TaskFormatError
from cua_rl.tasks.schema import Checks, Problem, check_evaluator, child, read_json, type_name
from cua_rl.types import TaskVariant

MAX_STEM_BYTES = 250
"""File systems cap names at 255 bytes; `.json` takes the rest."""


def evaluator_file_stem(name: str) -> str:
    """The file-name-safe, invertible form of an evaluator name (see module doc)."""
    stem = quote(name, safe="")
    return "%2E" + stem[1:] if stem.startswith(".") else stem


def evaluator_name_from_stem(stem: str) -> str:
    return unquote(stem)


def template_path(root: Path, task_id: str) -> Path:
    return root / "templates" / f"{task_id}.json"


def evaluator_path(root: Path, task_id: str, name: str) -> Path:
    return root / "evaluators" / task_id / f"{evaluator_file_stem(name)}.json"


def pair_task_ids(root: Path) -> list[str]:
    """Ids of every task with a template file or an evaluators folder under `root`."""
    ids = {p.stem for p in (root / "templates").glob("*.json")}
    ids |= {p.name for p in (root / "evaluators").glob("*") if p.is_dir()}
    return sorted(ids)


def read_template(path: Path) -> tuple[dict[str, str | None], list[Problem]]:
    """Names -> instructions of a template file, plus its shape problems.

    A name whose instruction is malformed maps to None: it still names an
    evaluator file, so pairing is judged on every name and a single bad entry
    gives a single problem line.
    """
    where = str(path)
    try:
        data = read_json(path)
    except TaskFormatError as exc:
        return {}, [Problem.from_line(where, "$", str(exc))]
    if not isinstance(data, dict):
        return {}, [
            Problem(
                where, "$", f"an object of evaluator name -> instruction, got {type_name(data)}"
            )
        ]
    if not data:
        return {}, [Problem(where, "$", "at least one evaluator name")]
    problems = []
    names: dict[str, str | None] = {}
    for name, instruction in data.items():
        if not name:
            problems.append(Problem(where, child("$", name), "a non-empty evaluator name"))
        elif len(evaluator_file_stem(name).encode()) > MAX_STEM_BYTES:
            problems.append(Problem(where, child("$", name), "a name that fits in a file name"))
        elif not isinstance(instruction, str) or not instruction.strip():
            names[name] = None
            problems.append(
                Problem(
                    where,
                    child("$", name),
                    f"a non-empty instruction string, got {type_name(instruction)}",
                )
            )
        else:
            names[name] = instruction
    return names, problems


def check_pair(
    root: Path, task_id: str, unimplemented_is_problem: bool = True
) -> tuple[dict[str, tuple[str, dict[str, Any]]], Checks]:
    """Check one task's template and evaluator files.

    Returns name -> (instruction, evaluator spec) for every well-formed variant and
    the checks. With `unimplemented_is_problem`, a metric/getter the registry does
    not implement is a problem line (what `templates validate` wants: a pair that
    cannot be scored is not done); otherwise it is only listed in `unimplemented`.
    """
    checks = Checks()
    template = template_path(root, task_id)
    folder = root / "evaluators" / task_id
    names: dict[str, str | None] = {}
    if template.is_file():
        names, problems = read_template(template)
        checks.problems += problems
        if not names:
            return {}, checks  # an unreadable template: pairing cannot be judged
    else:
        checks.problems.append(
            Problem(
                str(folder), "$", f"a template file {template} naming the evaluators in this folder"
            )
        )
    variants = {}
    for name, instruction in names.items():
        file = evaluator_path(root, task_id, name)
        if not file.is_file():
            checks.problems.append(
                Problem(str(template), child("$", name), f"an evaluator file {file} for this name")
            )
            continue
        spec_checks = _check_evaluator_file(file, unimplemented_is_problem)
        checks.extend(spec_checks)
        if not spec_checks.problems and instruction is not None:
            variants[name] = (instruction, read_json(file))
    for file in sorted(folder.glob("*.json")):
        name = evaluator_name_from_stem(file.stem)
        canonical = name in names and evaluator_file_stem(name) == file.stem
        if not canonical and template.is_file():
            checks.problems.append(
                Problem(
                    str(file),
                    "$",
                    f"an entry {name!r} in {template} (evaluator file without a template name)",
                )
            )
    return variants, checks


def _check_evaluator_file(file: Path, unimplemented_is_problem: bool) -> Checks:
    try:
        spec = read_json(file)
    except TaskFormatError as exc:
        return Checks(problems=[Problem.from_line(str(file), "$", str(exc))])
    checks = check_evaluator(spec, str(file))
    if checks.deep and not checks.problems:
        # A rule or option key no metric reads passes every other check (and the
        # golden, which never exercises it): a typo must fail here.
        from cua_rl.tasks.rule_keys import rule_key_findings

        checks.problems += [
            Problem(str(file), f"${sub}", expected) for sub, expected in rule_key_findings(spec)
        ]
    if unimplemented_is_problem and checks.unimplemented:
        from cua_rl.tasks.names import unknown_name_lines

        # One line per use, with a "did you mean" from the registered names.
        checks.problems += [
            Problem.from_line(str(file), "$", line)
            for line in unknown_name_lines(str(file), spec, checks.unimplemented)
        ]
    return checks


def load_variants(task: TaskVariant, root: Path | None) -> list[TaskVariant]:
    """The variants of a base task: one per template name, or the task itself.

    A task without a template file under `root` has one variant, its own
    evaluator and instruction. The original task comes first: the template entry
    whose evaluator spec is the task's own (runs and evaluations start from it,
    as Algorithm 2 does); without one, the template's order is kept. Malformed
    pairs raise `TaskFormatError` with one line per problem; unimplemented metric
    names do not (they fail at scoring).
    """
    if root is None or not template_path(root, task.task_id).is_file():
        return [task]
    variants, checks = check_pair(root, task.task_id, unimplemented_is_problem=False)
    if checks.problems:
        raise TaskFormatError("\n".join(str(p) for p in checks.problems))
    out = [
        replace(task, evaluator_name=name, instruction=instruction, evaluator=spec)
        for name, (instruction, spec) in variants.items()
    ]
    out.sort(key=lambda v: v.evaluator != task.evaluator)  # stable: the original first
    return out


def write_pair(
    root: Path, task_id: str, instructions: dict[str, str], evaluators: dict[str, dict[str, Any]]
) -> list[Path]:
    """Write one task's template file and evaluator files (names must match)."""
    if set(instructions) != set(evaluators):
        raise TaskFormatError(
            f"task {task_id}: template names {sorted(instructions)} "
            f"and evaluator names {sorted(evaluators)} must be the same"
        )
    template = template_path(root, task_id)
    template.parent.mkdir(parents=True, exist_ok=True)
    template.write_text(
        json.dumps(instructions, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    written = [template]
    for name, spec in evaluators.items():
        file = evaluator_path(root, task_id, name)
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(json.dumps(spec, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append(file)
    return written
