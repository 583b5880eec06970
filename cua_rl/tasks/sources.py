"""Where a run's tasks come from: `osworld:PATH` (a user's OSWorld checkout) or
`local` (the project's own suite in osworld_tasks/local/), restricted to a split.

This is the one place that turns a `--source` string into tasks and variants;
the CLI and the run composer both call it, so they agree on what a source means.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from cua_rl.errors import TaskFormatError, UnknownNameError
from cua_rl.tasks.names import task_set_name_problems
from cua_rl.tasks.osworld import (
    TaskLoad,
    examples_dir,
    load_osworld,
    load_tasks,
    read_test_split,
)
from cua_rl.tasks.pairs import load_variants
from cua_rl.tasks.splits import read_split
from cua_rl.types import TaskVariant

PROJECT_ROOT = Path(__file__).resolve().parents[2]
"""The source checkout (when installed from one): holds templates/, evaluators/, osworld_tasks/."""

LOCAL_SUITE = PROJECT_ROOT / "osworld_tasks" / "local"


def load_source(source: str, split: str | None = None) -> TaskLoad:
    """Tasks of `osworld:PATH` or `local`, restricted to `split` when given."""
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
    raise TaskFormatError(f"task source {source!r}: expected osworld:PATH or local")


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
    templates_root: Path | None = PROJECT_ROOT,
) -> list[list[TaskVariant]]:
    """The variants of every task in scope, one list per task (the first entry
    is the variant a run starts from). Raises on any malformed task and on any
    metric, getter or setup-step name nobody registered, so a run never starts
    with one (docs/architecture.md, failure rules)."""
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
        raise UnknownNameError(f"{len(unknown)} unknown name(s) in the task set:\n"
                               + "\n".join(unknown))
    return task_set
