"""Score one finished episode with its evaluator spec, with OSWorld's semantics.

Order and rules (OSWorld `DesktopEnv.evaluate`):
1. the spec is checked first; a malformed or unimplemented one raises
   TaskFormatError naming the task and JSON path, before the desktop is touched;
2. `postconfig` steps run (save the file, close the app, export CSVs ...);
3. `infeasible` scores 1 only when the agent's last action was `terminate`
   with status failure; any other task scores 0 when the agent declared failure;
4. metrics run in order, each fetching its own result/expected values first, so
   a short-circuit skips later getters: with `conj` "and" a zero score returns 0
   (mean otherwise), with "or" a score of 1 returns 1 (max otherwise);
5. a getter whose file does not exist scores that metric 0 (FileNotFoundError).

Getters are awaited (they talk to the desktop); metrics are sync functions run
in a thread so that parsing a large workbook never blocks the event loop.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cua_rl.errors import TaskFormatError
from cua_rl.evaluation.registry import GetterContext, check_evaluator_spec, get_getter, get_metric
from cua_rl.types import Action, TaskVariant

if TYPE_CHECKING:
    from cua_rl.desktop.client import GuestClient
    from cua_rl.desktop.file_cache import FileCache
    from cua_rl.desktop.setup_context import SetupContext

log = logging.getLogger(__name__)


def declared_failure(last_action: Action | None) -> bool:
    """The agent ended with `terminate(status=failure)` (OSWorld's FAIL action)."""
    return (
        last_action is not None
        and last_action.kind == "terminate"
        and last_action.status == "failure"
    )


def per_metric(spec: dict[str, Any], key: str, n: int, single: bool) -> list[Any]:
    """`spec[key]` as one entry per metric (a single metric's value, a list, or Nones)."""
    value = spec.get(key)
    if isinstance(value, list | dict) and len(value) == 0:
        value = None
    if single:
        return [value]
    return list(value) if isinstance(value, list) else [None] * n


async def _fetch(ctx: GetterContext, config: dict[str, Any]) -> Any:
    return await get_getter(config["type"]).func(ctx, config)


async def evaluate(
    variant: TaskVariant,
    client: GuestClient,
    *,
    cache: FileCache,
    context: SetupContext,
    last_action: Action | None,
    cache_dir: Path,
) -> float:
    """The evaluator score of the desktop's current state, in [0, 1]."""
    spec = variant.evaluator
    source = variant.source_path or variant.task_id
    where = f"task {variant.task_id} ({source}): $.evaluator"
    report = check_evaluator_spec(spec, where)
    if report.errors:
        raise TaskFormatError("\n".join(report.errors))
    if report.unimplemented:
        raise TaskFormatError(
            f"{where}: uses metrics/getters that are not implemented: "
            f"{', '.join(report.unimplemented)}"
        )

    from cua_rl.desktop.setup_steps import run_setup_steps  # late: keeps the registry light

    if spec.get("postconfig"):
        await run_setup_steps(
            client,
            spec["postconfig"],
            task_id=variant.task_id,
            cache=cache,
            context=context,
            phase="evaluator.postconfig",
        )

    func = spec["func"]
    if func == "infeasible":
        return 1.0 if declared_failure(last_action) else 0.0
    if declared_failure(last_action):
        return 0.0

    single = isinstance(func, str)
    names = [func] if single else list(func)
    conj = spec.get("conj", "and")
    results = per_metric(spec, "result", len(names), single)
    expecteds = per_metric(spec, "expected", len(names), single)
    options = per_metric(spec, "options", len(names), single)

    await asyncio.to_thread(cache_dir.mkdir, parents=True, exist_ok=True)
    ctx = GetterContext(
        client=client, cache=cache, cache_dir=cache_dir, task_id=variant.task_id, setup=context
    )
    loop = asyncio.get_running_loop()
    scores: list[float] = []
    for i, name in enumerate(names):
        try:
            result = await _fetch(ctx, results[i])
            args = [result]
            if expecteds[i] is not None:
                args.append(await _fetch(ctx, expecteds[i]))
        except FileNotFoundError as exc:
            log.info("task %s: %s: file not found (%s); scored 0", variant.task_id, name, exc)
            score = 0.0
        else:
            call = functools.partial(get_metric(name).func, *args, **(options[i] or {}))
            score = float(await loop.run_in_executor(None, call))
        if single:
            return score
        if conj == "and" and score == 0.0:
            return 0.0
        if conj == "or" and score == 1.0:
            return 1.0
        scores.append(score)
    return sum(scores) / len(scores) if conj == "and" else max(scores)
