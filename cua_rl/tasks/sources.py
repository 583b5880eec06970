"""Where a run's tasks come from: `osworld:PATH` (a user's OSWorld checkout),
`local` (the project's own suite in cua_rl/tasks/data/local/) or `pairs:DIR` (a pair
folder a user wrote with `cua-rl templates new`), restricted to a split.

This is the one place that turns a `tasks.source` string into tasks, variants
and the difficulty order of those variants; the CLI and the run composer both
call it, so they agree on what a source means. A pair folder brings its own
templates, evaluators and difficulty.json: a run on `pairs:DIR` reads all three
from DIR, never the project's (docs/pair-authoring.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from cua_rl.errors import TaskFormatError, UnknownNameError
from cua_rl.tasks.names import task_set_name_problems
from cua_rl.tasks.osworld import (
    TaskLoad,
    examples_dir,
    index_tasks,
    load_osworld,
    load_task_file,
    load_tasks,
    read_test_split,
)
from cua_rl.tasks.pairs import load_variants, pair_task_ids
from cua_rl.tasks.schema import Problem
from cua_rl.tasks.splits import read_split
from cua_rl.types import TaskVariant

DATA_ROOT = Path(__file__).resolve().parent / "data"
"""The project's task data, installed with the package (a wheel has it too): the local
suite's pairs (templates/, evaluators/), its tasks (local/), the goldens of OSWorld's
tasks (osworld/) and the splits (splits/)."""

LOCAL_SUITE = DATA_ROOT / "local"
SOURCE_FORMS = "osworld:PATH, local or pairs:DIR"
"""What a task source may be, for messages."""


def pair_folder(source: str) -> Path | None:
    """DIR of a `pairs:DIR` source, else None."""
    if not source.startswith("pairs:"):
        return None
    return Path(source.removeprefix("pairs:")).expanduser().resolve()


def templates_root_of(source: str, templates_root: Path | None) -> Path:
    """Where the variants of `source`'s tasks are read: a pair folder's own
    templates/ and evaluators/, else `templates_root` (None: the project's)."""
    return pair_folder(source) or templates_root or DATA_ROOT


def difficulty_file(source: str, templates_root: Path | None) -> Path:
    """The difficulty.json that orders the variants of `source`'s tasks: a pair
    folder's (or a user's templates root's) own, the local suite's for the
    project's templates. A pair folder's tasks never take the project's order."""
    root = templates_root_of(source, templates_root)
    if root.resolve() == DATA_ROOT:
        return LOCAL_SUITE / "difficulty.json"
    return root / "difficulty.json"


def load_source(source: str, split: str | None = None) -> TaskLoad:
    """Tasks of `osworld:PATH`, `local` or `pairs:DIR`, restricted to `split` when given."""
    folder = pair_folder(source)
    if folder is not None:
        return load_pair_tasks(folder, read_split(split) if split else None, split or "")
    if source.startswith("osworld:"):
        checkout = Path(source.removeprefix("osworld:")).expanduser()
        return load_osworld(checkout, _split_ids(split, checkout), split or "")
    if source == "local":
        if not LOCAL_SUITE.is_dir():
            raise TaskFormatError(
                f"no local task suite at {LOCAL_SUITE}; use --source osworld:PATH_TO_OSWORLD"
            )
        has_examples = any((LOCAL_SUITE / d).is_dir() for d in ("examples", "evaluation_examples"))
        folder = examples_dir(LOCAL_SUITE) / "examples" if has_examples else LOCAL_SUITE
        return load_tasks(folder, read_split(split) if split else None, split or "")
    raise TaskFormatError(f"task source {source!r}: expected {SOURCE_FORMS}")


def load_pair_tasks(folder: Path, ids: list[str] | None, ids_source: str) -> TaskLoad:
    """The base task of every pair under `folder` (or of `ids`): looked up in
    `folder/tasks/<domain>/` first, then in the project's local suite, as
    `templates validate` does (tasks/authoring.py)."""
    if not (folder / "templates").is_dir():
        raise TaskFormatError(
            f"pairs:{folder}: no templates/ folder; expected a pair folder "
            "made by `cua-rl templates new TASK_ID --root DIR`"
        )
    index = {**index_tasks(LOCAL_SUITE), **index_tasks(folder / "tasks")}
    load = TaskLoad()
    own = pair_task_ids(folder)
    for task_id in own if ids is None else ids:
        if task_id not in own:
            load.problems.append(
                Problem(
                    ids_source or str(folder),
                    "$",
                    f"task id {task_id!r} to have a pair in {folder}/templates/",
                )
            )
        elif task_id not in index:
            load.problems.append(
                Problem(
                    str(folder / "templates" / f"{task_id}.json"),
                    "$",
                    f"a base task {folder}/tasks/<domain>/{task_id}.json (or one in {LOCAL_SUITE})",
                )
            )
        else:
            load_task_file(index[task_id], into=load)
    return load


def _split_ids(split: str | None, checkout: Path) -> list[str] | None:
    """A shipped split or file, else one of the checkout's own (`test_small`, ...)."""
    if not split:
        return None
    try:
        return read_split(split)
    except TaskFormatError:
        if not (examples_dir(checkout) / f"{split.removesuffix('.json')}.json").is_file():
            raise
        return read_test_split(checkout, split)


def load_task_set(
    source: str,
    split: str | None = None,
    ids: Iterable[str] = (),
    templates_root: Path | None = DATA_ROOT,
) -> list[list[TaskVariant]]:
    """The variants of every task in scope, one list per task (the first entry
    is the variant a run starts from). Raises on any malformed task and on any
    metric, getter or setup-step name nobody registered, so a run never starts
    with one (docs/architecture.md, failure rules). A `pairs:DIR` source reads
    its variants from DIR whatever `templates_root` says."""
    templates_root = templates_root_of(source, templates_root)
    load = load_source(source, split)
    load.raise_for_problems()
    wanted = list(ids)
    tasks = load.tasks
    if wanted:
        by_id = {t.task_id: t for t in tasks}
        missing = [i for i in wanted if i not in by_id]
        if missing:
            raise TaskFormatError(f"task ids not found in {source}: {', '.join(missing)}")
        tasks = [by_id[i] for i in wanted]
    task_set = [load_variants(task, templates_root) for task in tasks]
    unknown = task_set_name_problems(task_set, templates_root)
    if unknown:  # it would fail at the first evaluation, after whole episodes
        raise UnknownNameError(
            f"{len(unknown)} unknown name(s) in the task set:\n" + "\n".join(unknown)
        )
    return task_set
