"""What `tasks validate` and `templates validate` find: structural problems of
template/evaluator pairs, golden files and difficulty entries, and metric, getter
and setup-step names nobody registered.

Unknown names are problems for both: a run refuses to start with them
(tasks/names.py), so validation must not pass them. Problems are lines
`file: $.json.path: what was expected`, one per problem.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from cua_rl.tasks.authoring import AuthoringRoot, difficulty_problems, golden_problems
from cua_rl.tasks.names import variant_name_problems
from cua_rl.tasks.osworld import TaskLoad
from cua_rl.tasks.pairs import check_pair, pair_task_ids, read_template, template_path
from cua_rl.tasks.schema import Problem
from cua_rl.tasks.sources import DATA_ROOT

NAMES_UNCHECKED = (
    "note: metric/getter names were not checked (cua_rl.evaluation.registry is not available yet)"
)
"""Said when `Findings.names_checked` is false."""


class NotAPairPath(ValueError):
    """A path that names no template, evaluator, authoring folder or task id."""


@dataclass(slots=True)
class Findings:
    """Problem lines, unknown-name lines, how many variants were checked, and
    whether the metric/getter registry was there to check names against."""

    problems: list[str]
    unknown_names: list[str]
    variants: int
    names_checked: bool


def validate_load(load: TaskLoad, templates_root: Path) -> Findings:
    """The pair problems and unknown names of the tasks in `load` (its own file
    problems are `load.problems`, not repeated here). A task with a pair counts its
    runnable variants (none when the pair has problems), one without counts 1."""
    problems: list[str] = []
    unknown: list[str] = []
    variants = 0
    names_checked = load.names_checked
    for task in load.tasks:
        runnable = [task]
        if template_path(templates_root, task.task_id).is_file():
            found, checks = check_pair(templates_root, task.task_id, unimplemented_is_problem=False)
            problems += [str(problem) for problem in checks.problems]
            runnable = (
                []
                if checks.problems
                else [
                    replace(task, evaluator_name=name, instruction=instruction, evaluator=spec)
                    for name, (instruction, spec) in found.items()
                ]
            )
            names_checked = names_checked and checks.deep
        variants += max(len(runnable), 1)
        unknown += dict.fromkeys(
            line for variant in runnable for line in variant_name_problems(variant, templates_root)
        )
    return Findings(problems, unknown, variants, names_checked)


def pair_targets(paths: tuple[Path, ...], root: Path | None) -> list[tuple[Path, str]]:
    """(root, task id) pairs named by `templates validate`'s PATHS: template files,
    evaluator files or folders, folders holding templates/ and evaluators/, or task
    ids under `root`; none means every pair under `root` (default: this project's)."""
    if not paths:
        base = root or DATA_ROOT
        return [(base, task_id) for task_id in pair_task_ids(base)]
    targets = []
    for path in paths:
        if path.is_file() and path.parent.name == "templates":
            targets.append((path.parent.parent, path.stem))
        elif path.is_file() and path.parent.parent.name == "evaluators":
            targets.append((path.parent.parent.parent, path.parent.name))
        elif path.is_dir() and path.parent.name == "evaluators":
            targets.append((path.parent.parent, path.name))
        elif (path / "templates").is_dir() or (path / "evaluators").is_dir():
            targets += [(path, task_id) for task_id in pair_task_ids(path)]
        elif root is not None and not path.exists():
            targets.append((root, str(path)))  # a bare task id under --root
        else:
            raise NotAPairPath(
                f"{path}: expected templates/<id>.json, evaluators/<id>[/<name>.json], a folder "
                "with templates/ or evaluators/, or (with --root) a task id"
            )
    return list(dict.fromkeys(targets))


def validate_pairs(targets: list[tuple[Path, str]]) -> Findings:
    """Every problem of the pairs `targets` (shape, pairing, names, the rule and option
    keys each metric reads, golden solutions, difficulty entries); names nobody
    registered are among `problems` here, `unknown_names` stays empty."""
    problems: list[str] = []
    variants = 0
    names_checked = True
    for pair_root, task_id in targets:
        found, checks = check_pair(pair_root, task_id, unimplemented_is_problem=True)
        problems += [str(p) for p in checks.problems]
        if template_path(pair_root, task_id).is_file():
            problems += [str(p) for p in authoring_problems(AuthoringRoot.of(pair_root), task_id)]
        variants += len(found)
        names_checked = names_checked and checks.deep
    return Findings(problems, [], variants, names_checked)


def authoring_problems(layout: AuthoringRoot, task_id: str) -> list[Problem]:
    """Golden file and difficulty entry of one pair (see tasks/authoring.py), where
    the root keeps them: a root of templates and evaluators only (an import of
    the RLAnything release) has its base tasks and goldens elsewhere."""
    names = list(read_template(template_path(layout.root, task_id))[0])
    problems = difficulty_problems(layout.difficulty, {task_id: names})
    if (layout.golden_root / "golden").is_dir():
        problems = golden_problems(layout, task_id, names) + problems
    return problems
