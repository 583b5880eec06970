"""Convert the RLAnything (Open-AgentRL) task release into template/evaluator pairs.

The release ships OSWorld task files extended with `task_template` ({name:
canonical instruction}), `evaluator_list` ({name: evaluator spec}) and
`current_task` (the variant a training run last used, with the rewriter's
hints in its instruction). Only the first two describe the task; `current_task`
is selector state of their run and is not imported (our selector keeps its own
state in the run store). Files without `task_template` are single-variant tasks
and produce nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from cua_rl.errors import TaskFormatError
from cua_rl.tasks.pairs import write_pair
from cua_rl.tasks.schema import read_json, type_name


@dataclass
class ImportSummary:
    tasks: int = 0
    """Template files written (tasks with variants)."""
    variants: int = 0
    """Evaluator files written."""
    skipped: int = 0
    """Task files without `task_template` (one variant, nothing to write)."""
    files: list[Path] = field(default_factory=list)


def release_examples_dir(path: Path) -> Path:
    """`new_examples` of the release, given it or its parent."""
    if (path / "new_examples").is_dir():
        return path / "new_examples"
    if any(path.glob("*/*.json")):
        return path
    raise TaskFormatError(
        f"{path}: expected Open-AgentRL's new_examples folder "
        "(<domain>/<id>.json files) or the folder containing it"
    )


def import_openagentrl(source: Path, out: Path) -> ImportSummary:
    """Write `out/templates/<id>.json` and `out/evaluators/<id>/<name>.json`.

    Input is checked before anything is written for a task: both maps must be
    objects with the same names. Evaluator specs are copied as they are;
    `cua-rl templates validate --root OUT` judges them.
    """
    summary = ImportSummary()
    for file in sorted(release_examples_dir(source).glob("*/*.json")):
        data = read_json(file)
        if not isinstance(data, dict):
            raise TaskFormatError(f"{file}: $: expected a task object, got {type_name(data)}")
        if "task_template" not in data:
            summary.skipped += 1
            continue
        template, evaluators = data["task_template"], data.get("evaluator_list")
        for key, value in (("task_template", template), ("evaluator_list", evaluators)):
            if not isinstance(value, dict) or not value:
                raise TaskFormatError(
                    f"{file}: $.{key}: expected a non-empty object keyed by "
                    f"evaluator name, got {type_name(value)}"
                )
        if set(template) != set(evaluators):
            raise TaskFormatError(
                f"{file}: $.evaluator_list: expected the same names as $.task_template "
                f"({sorted(template)}), got {sorted(evaluators)}"
            )
        task_id = data.get("id") if isinstance(data.get("id"), str) else file.stem
        summary.files += write_pair(out, task_id, template, evaluators)
        summary.tasks += 1
        summary.variants += len(template)
    return summary
