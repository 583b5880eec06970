"""OSWorld task setup (`config`) and `evaluator.postconfig` steps, run on a desktop.

Each step type is one entry of `SETUP_STEPS`: a pydantic model of its
parameters and an async handler. The same models check task files without a
desktop (`validate_setup_steps`) and guard the runner, so a step's parameters are
defined once. Later code adds step types by name with `register_setup_step`.

Parameter names and semantics follow OSWorld's SetupController, including what
it tolerates: it only logs a failed launch, execute, window or wallpaper step,
and OSWorld-Verified scores were measured that way (a postconfig that activates
a window the agent already closed must not fail the evaluation). Those steps are
marked `best_effort`; their failures become warnings unless `SetupContext.strict`,
which applies to the task's setup (`config`) only: in the evaluator's postconfig
the windows and apps are the agent's doing (a document it never created has no
window to activate), so there they always warn, as in OSWorld.
Malformed steps, unknown types and failed downloads, uploads and opens always
raise `SetupStepError`. A desktop that stops answering raises `GuestUnavailable`
unchanged, so callers abort the episode instead of blaming the task.
"""

from __future__ import annotations

import asyncio
import logging
import re
import shlex
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import ValidationError

from cua_rl.desktop.client import GuestClient
from cua_rl.desktop.exec_result import ExecResult
from cua_rl.desktop.file_cache import FileCache
from cua_rl.desktop.setup_context import SetupContext
from cua_rl.desktop.setup_step_params import (
    ActivateWindowParams,
    ChangeWallpaperParams,
    CloseWindowParams,
    Command,
    DownloadParams,
    ExecuteParams,
    ExecuteWithVerificationParams,
    LaunchParams,
    OpenParams,
    SleepParams,
    StepParams,
    UploadFileParams,
)
from cua_rl.desktop.setup_steps.app_progress import launched_alive, launched_text, window_list
from cua_rl.errors import GuestError, GuestUnavailable, SetupStepError

log = logging.getLogger(__name__)

P = TypeVar("P", bound=StepParams)


@dataclass(slots=True)
class StepRun(Generic[P]):
    """One step being run: its parsed parameters and everything a handler may use."""

    client: GuestClient
    params: P
    cache: FileCache
    context: SetupContext
    where: str
    """Prefix for messages, e.g. `task abc: config[3] ('download')`."""
    launched: list[str] = field(default_factory=list)
    """Commands launched by earlier steps of the same setup, as `ps` shows them
    (`app_progress.launched_text`), shared by its steps: `activate_window` waits
    while one of them still runs."""


Handler = Callable[[StepRun[Any]], Awaitable[None]]
TypedHandler = Callable[[StepRun[P]], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class StepSpec:
    params: type[StepParams]
    run: Handler
    best_effort: bool = False


SETUP_STEPS: dict[str, StepSpec] = {}
"""Step type -> spec. Extend with `register_setup_step`, never by editing callers."""


def register_setup_step(
    name: str, params: type[P], *, best_effort: bool = False
) -> Callable[[TypedHandler[P]], TypedHandler[P]]:
    """Decorator adding (or replacing) the step type `name`.

    `best_effort` marks steps whose desktop failures OSWorld only logs.
    """

    def add(handler: TypedHandler[P]) -> TypedHandler[P]:
        SETUP_STEPS[name] = StepSpec(params=params, run=handler, best_effort=best_effort)
        return handler

    return add


# parsing -----------------------------------------------------------------------


def parse_setup_step(step: Any, *, where: str, index: int) -> tuple[str, StepSpec, StepParams]:
    """Check one step's shape; raise SetupStepError naming index, field and expectation."""
    at = f"{where}[{index}]"
    if not isinstance(step, Mapping):
        raise SetupStepError(
            f"{at}: expected an object with 'type' and 'parameters', got {type(step).__name__}"
        )
    kind = step.get("type")
    if not isinstance(kind, str):
        raise SetupStepError(f"{at}: field 'type': expected a step type string, got {kind!r}")
    spec = SETUP_STEPS.get(kind)
    if spec is None:
        known = ", ".join(sorted(SETUP_STEPS))
        raise SetupStepError(f"{at}: unknown step type {kind!r} (known: {known})")
    raw = step.get("parameters", {})
    if not isinstance(raw, Mapping):
        raise SetupStepError(
            f"{at} ({kind!r}): field 'parameters': expected an object, got {type(raw).__name__}"
        )
    try:
        return kind, spec, spec.params.model_validate(dict(raw))
    except ValidationError as exc:
        raise SetupStepError(f"{at} ({kind!r}): {_describe(exc)}") from None


def validate_setup_steps(steps: Any, *, where: str) -> list[str]:
    """Every problem of a step list, without a desktop (empty when all steps are valid).

    `where` names the list, e.g. `examples/os/abc.json: evaluator.postconfig`.
    """
    if steps is None:
        return []
    if not isinstance(steps, list):
        return [f"{where}: expected a list of steps, got {type(steps).__name__}"]
    problems = []
    for index, step in enumerate(steps):
        try:
            parse_setup_step(step, where=where, index=index)
        except SetupStepError as exc:
            problems.append(str(exc))
    return problems


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False):
        loc = ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in err["loc"])
        loc = "parameters" + ("." + loc if loc else "")
        loc = loc.replace(".[", "[")
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown parameter for this step type"
        got = "" if err["type"] == "missing" else f" (got {err['input']!r:.80})"
        parts.append(f"field '{loc}': {msg}{got}")
    return "; ".join(parts)


# running -----------------------------------------------------------------------


async def run_setup_steps(
    client: GuestClient,
    steps: Sequence[Mapping[str, Any]],
    *,
    task_id: str,
    cache: FileCache,
    context: SetupContext,
    phase: str = "config",
) -> list[str]:
    """Run steps in order; return the warnings of best-effort steps that failed.

    All steps are checked before the first one runs, so a malformed task never
    leaves a desktop half set up.
    """
    where = f"task {task_id}: {phase}"
    parsed = [parse_setup_step(step, where=where, index=i) for i, step in enumerate(steps)]
    warnings: list[str] = []
    launched: list[str] = []
    for index, (kind, spec, params) in enumerate(parsed):
        at = f"{where}[{index}] ({kind!r})"
        run = StepRun(
            client=client, params=params, cache=cache, context=context, where=at, launched=launched
        )
        try:
            await spec.run(run)
        except GuestUnavailable:
            raise
        except GuestError as exc:
            if spec.best_effort and not (context.strict and phase == "config"):
                log.warning("%s failed on the desktop, continuing as OSWorld does: %s", at, exc)
                warnings.append(f"{at}: {exc}")
                continue
            raise SetupStepError(f"{at}: failed on the desktop: {exc}") from exc
        except SetupStepError as exc:
            raise SetupStepError(f"{at}: {exc}") from exc
    return warnings


_PLACEHOLDER = re.compile(
    r"\{(SCREEN_WIDTH_HALF|SCREEN_HEIGHT_HALF|SCREEN_WIDTH|SCREEN_HEIGHT|CLIENT_PASSWORD)\}"
)


def substitute_placeholders(command: Command, context: SetupContext) -> Command:
    """Replace OSWorld's {SCREEN_WIDTH}-style placeholders in every string of a command."""
    values = context.placeholders()

    def sub(text: str) -> str:
        return _PLACEHOLDER.sub(lambda m: values[m.group(1)], text)

    return sub(command) if isinstance(command, str) else [sub(part) for part in command]


def _require_ok(result: ExecResult, what: str) -> ExecResult:
    if result.status != "success":
        raise GuestError(f"{what}: status {result.status}: {result.error or result.output}")
    return result


# handlers ----------------------------------------------------------------------


@register_setup_step("download", DownloadParams)
async def _download(run: StepRun[DownloadParams]) -> None:
    for f in run.params.files:
        local = await run.cache.fetch(f.url)
        data = await asyncio.to_thread(local.read_bytes)
        await run.client.upload_file(f.path, data)


@register_setup_step("upload_file", UploadFileParams)
async def _upload_file(run: StepRun[UploadFileParams]) -> None:
    for f in run.params.files:
        local = await asyncio.to_thread(_resolve_local, f.local_path, run.context.local_root)
        await run.client.upload_file(f.path, await asyncio.to_thread(local.read_bytes))


@register_setup_step("open", OpenParams)
async def _open(run: StepRun[OpenParams]) -> None:
    await run.client.open_file(run.params.path)


@register_setup_step("launch", LaunchParams, best_effort=True)
async def _launch(run: StepRun[LaunchParams]) -> None:
    command: Command = run.params.command
    if isinstance(command, str) and not run.params.shell:
        command = shlex.split(command)  # an argv, as the guest's own launch route does
    await run.client.launch(command, shell=run.params.shell)
    run.launched.append(launched_text(command, run.params.shell))


async def _execute(run: StepRun[ExecuteParams]) -> None:
    p, ctx = run.params, run.context
    if (p.stdout or p.stderr) and ctx.output_dir is None:
        raise SetupStepError("field 'parameters.stdout'/'stderr' needs SetupContext.output_dir")
    command = substitute_placeholders(p.command, ctx)
    loop = asyncio.get_running_loop()
    end = loop.time() + ctx.until_deadline_s
    while True:
        # A non-zero exit code is data, not a failure: postconfig steps such as
        # `diff` report through it and the evaluator reads their output.
        result = _require_ok(
            await run.client.execute(command, shell=p.shell, timeout=ctx.execute_timeout_s),
            "execute",
        )
        if p.until is None or p.until.met_by(result):
            break
        if loop.time() >= end:
            raise GuestError(
                f"'until' {p.until.model_dump(exclude_none=True)} not met within "
                f"{ctx.until_deadline_s:.0f} s; last result {result}"
            )
        await asyncio.sleep(0.3)
    for name, text in ((p.stdout, result.output), (p.stderr, result.error)):
        if name:
            assert ctx.output_dir is not None
            out = ctx.output_dir / name
            await asyncio.to_thread(_write_text, out, text)


register_setup_step("execute", ExecuteParams, best_effort=True)(_execute)
register_setup_step("command", ExecuteParams, best_effort=True)(_execute)


@register_setup_step("execute_with_verification", ExecuteWithVerificationParams)
async def _execute_with_verification(run: StepRun[ExecuteWithVerificationParams]) -> None:
    p = run.params
    result = await run.client.execute_with_verification(
        substitute_placeholders(p.command, run.context),
        shell=p.shell,
        verification=p.verification,
        max_wait_time=p.max_wait_time,
        check_interval=p.check_interval,
    )
    _require_ok(result, "execute_with_verification")


@register_setup_step("sleep", SleepParams)
async def _sleep(run: StepRun[SleepParams]) -> None:
    await asyncio.sleep(run.params.seconds)


@register_setup_step("activate_window", ActivateWindowParams, best_effort=True)
async def _activate_window(run: StepRun[ActivateWindowParams]) -> None:
    """Activate the window, waiting for it by progress (`app_progress`): the wait ends
    `window_wait_s` after the desktop's window list last changed (a window appeared,
    closed or was retitled) while no app this setup launched still runs, or at the
    cap, whichever comes first."""
    p = run.params
    loop = asyncio.get_running_loop()
    wait_s = run.context.window_wait_s
    cap = loop.time() + wait_s * run.context.window_wait_cap
    end, seen = loop.time() + wait_s, None
    while True:
        try:
            await run.client.activate_window(p.window_name, strict=p.strict, by_class=p.by_class)
            return
        except GuestUnavailable:
            raise
        except GuestError:  # no such window (yet)
            now = loop.time()
            if now >= end:
                windows = await window_list(run.client)
                changed = windows is not None and windows != seen
                alive = not changed and await launched_alive(run.client, run.launched)
                if now >= cap or not (changed or alive):
                    raise
                if seen is not None:
                    log.info(
                        "%s: %s while waiting for %r: %.300s",
                        run.where,
                        "windows still changing" if changed else "its app still runs",
                        p.window_name,
                        windows,
                    )
                seen, end = windows, min(cap, now + wait_s)
        await asyncio.sleep(0.3)


@register_setup_step("close_window", CloseWindowParams, best_effort=True)
async def _close_window(run: StepRun[CloseWindowParams]) -> None:
    p = run.params
    if not await run.client.close_window(p.window_name, strict=p.strict, by_class=p.by_class):
        # OSWorld's guest runs `wmctrl -c` and answers 200 whatever wmctrl found: a window
        # that is not open (e.g. a dialog the agent never opened) is already closed.
        log.info("%s: no window matches %r; nothing to close", run.where, p.window_name)


@register_setup_step("change_wallpaper", ChangeWallpaperParams, best_effort=True)
async def _change_wallpaper(run: StepRun[ChangeWallpaperParams]) -> None:
    await run.client.change_wallpaper(run.params.path)


def _resolve_local(local_path: str, root: Path | None) -> Path:
    local = Path(local_path).expanduser()
    if not local.is_absolute() and root is not None:
        local = root / local
    if not local.is_file():
        raise SetupStepError(f"field 'local_path' {local_path!r}: no such file ({local})")
    return local


def _write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
