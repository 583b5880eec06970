"""Names a task uses that nobody registered: metrics, getters, setup steps.

A task whose evaluator names a metric the registry does not have can be loaded
and run, and then fails at scoring, after a whole episode; before this check it
killed the run at the first evaluation, other tasks included. `tasks validate`
and every run's start (train, eval, rollout) use `unknown_name_lines`, so a typo
is reported before anything starts, one line per use:

    evaluators/t1/easy.json: $.evaluator.func: unknown metric 'exact_mach'
    (did you mean 'exact_match'?)

(on one line). Suggestions come from difflib over the registered names.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from cua_rl.tasks.schema import locate_name
from cua_rl.types import TaskVariant


def unknown_name_lines(
    file: str, spec_root: Any, names: Iterable[str], root_path: str = "$"
) -> list[str]:
    """One problem line per unregistered name, as `tasks validate` prints them.

    `names` are as the task checks report them: `metric`, `getter`,
    `metric(feature)` or `step:<type>`; `spec_root` is the JSON the names were
    found in (located at `root_path`) so the line can give the JSON path.
    """
    lines = []
    for name in dict.fromkeys(names):
        where = locate_name(spec_root, name, root_path)
        lines.append(f"{file}: {where}: {_describe(name, where)}")
    return lines


def variant_name_problems(variant: TaskVariant, templates_root: Path | None) -> list[str]:
    """Unregistered names in one runnable variant: its setup steps (`config`), its
    evaluator's metrics and getters, and its evaluator's `postconfig` steps."""
    from cua_rl.desktop.setup_steps import SETUP_STEPS
    from cua_rl.evaluation.registry import check_evaluator_spec

    names: list[str] = []
    for step in (*variant.config, *(variant.evaluator.get("postconfig") or ())):
        kind = step.get("type") if isinstance(step, dict) else None
        if isinstance(kind, str) and kind not in SETUP_STEPS:
            names.append(f"step:{kind}")
    names += check_evaluator_spec(variant.evaluator, "").unimplemented
    if not names:
        return []
    evaluator_file = (
        (templates_root / "evaluators" / variant.task_id / f"{variant.evaluator_name}.json")
        if templates_root
        else None
    )
    if evaluator_file is not None and evaluator_file.is_file():
        file, spec = str(evaluator_file), {"evaluator": variant.evaluator}
        steps = [n for n in names if n.startswith("step:")]
        rest = [n for n in names if not n.startswith("step:")]
        return unknown_name_lines(
            variant.source_path, {"config": list(variant.config)}, steps
        ) + unknown_name_lines(file, spec, rest)
    task = {"config": list(variant.config), "evaluator": variant.evaluator}
    return unknown_name_lines(variant.source_path or variant.task_id, task, names)


def task_set_name_problems(
    task_set: Iterable[Iterable[TaskVariant]], templates_root: Path | None
) -> list[str]:
    """Every unregistered name of a run's task set (all variants), one line each."""
    lines: list[str] = []
    for variants in task_set:
        for variant in variants:
            lines += variant_name_problems(variant, templates_root)
    return list(dict.fromkeys(lines))


def _describe(name: str, where: str) -> str:
    from cua_rl.desktop.setup_steps import SETUP_STEPS
    from cua_rl.evaluation.registry import getter_names, metric_names

    if name.startswith("step:"):
        kind, known = "setup step", sorted(SETUP_STEPS)
        bare = name.removeprefix("step:")
    elif "(" in name:
        metric, feature = name.rstrip(")").split("(", 1)
        return f"metric {metric!r} does not implement {feature!r} yet"
    elif where.endswith(".type"):
        kind, known, bare = "getter", getter_names(), name
    else:
        kind, known, bare = "metric", metric_names(), name
    close = difflib.get_close_matches(bare, known, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown {kind} {bare!r}{hint}"
