"""Why an evaluator gave the score it gave: each metric's own score with the values
it compared, for the lines of `templates validate --on-desktop` and the no-op
agent check ("golden scored 0, expected 1" alone sends the author guessing).

The explanation re-runs the getters and metrics on the same desktop right after
scoring (postconfig already ran, nothing has touched the state since), through
the same registry `evaluate` uses. It never raises: whatever goes wrong while
explaining becomes part of the text, the score itself stands as measured.
"""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cua_rl.evaluation.evaluate import per_metric
from cua_rl.evaluation.registry import GetterContext, get_getter, get_metric
from cua_rl.types import TaskVariant

if TYPE_CHECKING:
    from cua_rl.desktop.client import GuestClient
    from cua_rl.desktop.file_cache import FileCache
    from cua_rl.desktop.setup_context import SetupContext

MAX_VALUE_CHARS = 160
"""Characters shown per value; a file value shows its path and the start of its text."""
EXPLAIN_TIMEOUT_S = 60.0


def show_value(value: Any) -> str:
    """A short, one-line rendering of a getter's value (a file: path, size, text head)."""
    if (
        isinstance(value, str | Path)
        and len(str(value)) < 4096
        and Path(value).is_absolute()
        and Path(value).is_file()
    ):
        path = Path(value)
        head = path.read_bytes()[:MAX_VALUE_CHARS]
        try:
            text = repr(head.decode("utf-8"))
        except UnicodeDecodeError:
            text = f"{len(head)}+ binary bytes"
        return f"file {path.name} ({path.stat().st_size} B): {text}"
    text = repr(value).replace("\n", "\\n")
    return text if len(text) <= MAX_VALUE_CHARS else text[:MAX_VALUE_CHARS] + "..."


async def explain_score(
    variant: TaskVariant,
    client: GuestClient,
    *,
    cache: FileCache,
    context: SetupContext,
    cache_dir: Path,
) -> str:
    """`metric NAME scored S: got X, expected Y` per metric of the variant, `; `-joined."""
    spec = variant.evaluator
    func = spec.get("func")
    if func == "infeasible":
        return "metric 'infeasible' scores 1 only after terminate(status=failure)"
    single = isinstance(func, str)
    names = [func] if single else list(func or [])
    results = per_metric(spec, "result", len(names), single)
    expecteds = per_metric(spec, "expected", len(names), single)
    options = per_metric(spec, "options", len(names), single)
    ctx = GetterContext(
        client=client,
        cache=cache,
        cache_dir=cache_dir / "explain",
        task_id=variant.task_id,
        setup=context,
    )
    parts = []
    try:
        async with asyncio.timeout(EXPLAIN_TIMEOUT_S):
            await asyncio.to_thread(ctx.cache_dir.mkdir, parents=True, exist_ok=True)
            for i, name in enumerate(names):
                parts.append(await _explain_one(ctx, name, results[i], expecteds[i], options[i]))
    except Exception as exc:  # explaining is best effort; the score stands
        parts.append(f"(explanation stopped: {type(exc).__name__}: {exc})")
    return "; ".join(parts)


async def _explain_one(
    ctx: GetterContext, name: str, result_cfg: Any, expected_cfg: Any, options: Any
) -> str:
    try:
        got = await get_getter(result_cfg["type"]).func(ctx, result_cfg)
    except FileNotFoundError as exc:
        return f"metric {name!r} scored 0: result file not found ({exc})"
    args = [got]
    if expected_cfg is not None:
        try:
            args.append(await get_getter(expected_cfg["type"]).func(ctx, expected_cfg))
        except FileNotFoundError as exc:
            return f"metric {name!r} scored 0: expected file not found ({exc})"
    call = functools.partial(get_metric(name).func, *args, **(options or {}))
    try:
        score = float(await asyncio.to_thread(call))
    except Exception as exc:
        return f"metric {name!r} raised {type(exc).__name__}: {exc}"
    text = f"metric {name!r} scored {score:g}: got {show_value(got)}"
    if expected_cfg is not None:
        text += f", expected {show_value(args[1])}"
    return text
