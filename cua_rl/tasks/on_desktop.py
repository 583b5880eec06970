"""`cua-rl templates validate --on-desktop`: prove every variant can be scored 0 and 1.

For each task in scope, on a local desktop:
1. reset, run the task's setup steps, score the untouched initial state with
   every variant's evaluator: each must give 0.0 (otherwise the task is
   already solved before the agent acts);
2. per variant: reset, setup, run the variant's golden solution, score: must
   give 1.0 (otherwise the evaluator cannot be satisfied, or the setup is wrong).

Golden solutions live in `<golden root>/golden/<domain>/<task id>.json` (the
project's: `cua_rl/tasks/data/local/`; an authoring root's: itself) as
{variant name: [step, ...]} with steps `{"pyautogui": code}`,
`{"execute": {"command": ..., "shell": bool, "until": {...}}}` (polled like the
setup step of that name, so readiness is awaited, never slept through) and
`{"sleep": seconds}`. They sit outside `<domain>/` because the task loader
reads every `<domain>/*.json` as a task.

Every job yields exactly one `Outcome` per variant it scores; a job that raises
(setup, golden step, evaluator, dead desktop) becomes outcomes with the error
text, never a crash of the whole run. A failed golden job is never retried (a
golden that passes only sometimes is a bug to fix, not to hide); instead its
line names the phase or golden step that was running and points at a
screenshot and the window list taken on the spot, kept in a temporary folder
that outlives the run.

The jobs, their outcomes, their plan from (task, variants) groups and the report are
in check_jobs.py; this module runs them.
"""

from __future__ import annotations

import asyncio
import os
import re
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cua_rl.desktop.client import GuestClient
from cua_rl.desktop.setup_step_params import ExecuteParams
from cua_rl.tasks.check_jobs import Group, Job, Outcome, Report, plan_jobs
from cua_rl.types import Action

JOB_TIMEOUT_S = 240.0
"""Deadline for one reset + setup + golden + evaluation (GIMP starts in ~5 s)."""
STEP_SHARE = 4
"""A golden step (an action, a command, an `until` poll) may take 1/STEP_SHARE of the
job's deadline: 60 s at the default; more on desktops given a longer one (a VM under
TCG runs a page script or an app several times slower)."""
DIAGNOSE_TIMEOUT_S = 20.0
"""Deadline for the screenshot and window list taken when a golden job fails."""


@dataclass(slots=True)
class Progress:
    """What a job is doing right now, so a failure (a timeout included) can say
    which phase or golden step was running."""

    phase: str = "lease"

    def golden_step(self, index: int, total: int, step: dict[str, Any]) -> None:
        ((kind, value),) = step.items()
        what = value.get("command") if isinstance(value, dict) else value
        text = " ".join(what) if isinstance(what, list) else str(what)
        text = " ".join(text.split())
        self.phase = f"golden[{index}/{total}] {kind}: {text[:120]}"


async def run_golden(
    client: GuestClient,
    steps: Sequence[dict[str, Any]],
    until_deadline_s: float = 60.0,
    progress: Progress | None = None,
) -> None:
    """Run golden steps in order; a failed action or command raises RuntimeError. A
    command may take `until_deadline_s` (an action half of it), and so may an `until`
    poll."""
    loop = asyncio.get_running_loop()
    for index, step in enumerate(steps):
        ((kind, value),) = step.items()
        at = f"golden[{index}] ({kind})"
        if progress is not None:
            progress.golden_step(index, len(steps), step)
        if kind == "sleep":
            await asyncio.sleep(float(value))
        elif kind == "pyautogui":
            result = await client.act(value, timeout=until_deadline_s / 2)
            if result.status != "success":
                raise RuntimeError(f"{at}: {result.status}: {result.error or result.output}")
        else:
            params = ExecuteParams.model_validate(value)
            end = loop.time() + until_deadline_s
            while True:
                result = await client.execute(
                    params.command, shell=params.shell, timeout=until_deadline_s
                )
                if params.until is None:
                    if not result.ok:
                        raise RuntimeError(
                            f"{at}: exit {result.returncode}: "
                            f"{(result.error or result.output).strip()[-300:]}"
                        )
                    break
                if result.status == "success" and params.until.met_by(result):
                    break
                if loop.time() >= end:
                    last = (result.error or result.output).strip()[-200:]
                    raise RuntimeError(
                        f"{at}: 'until' not met within {until_deadline_s:.0f} s"
                        + (f"; last output: {last}" if last else "")
                    )
                await asyncio.sleep(0.2)


async def _run_job(
    job: Job,
    client: GuestClient,
    work: Path,
    number: int,
    progress: Progress,
    cache: Any,
    step_timeout_s: float = JOB_TIMEOUT_S / STEP_SHARE,
) -> list[Outcome]:
    """Setup, golden (if any) and scoring on a desktop that was just reset; task assets
    come from `cache` (a FileCache)."""
    from cua_rl.desktop.setup_steps import SetupContext, run_setup_steps
    from cua_rl.evaluation import evaluate
    from cua_rl.tasks.score_explain import explain_score

    folder = work / f"job-{number:04d}"
    width, height = await client.screen_size()
    context = SetupContext(
        screen_width=width, screen_height=height, strict=True, output_dir=folder / "output"
    )
    declared = None if job.declared is None else Action(kind="terminate", status=job.declared)
    progress.phase = "setup"
    await run_setup_steps(
        client, list(job.task.config), task_id=job.task.task_id, cache=cache, context=context
    )
    if job.golden is not None:
        await run_golden(client, job.golden, step_timeout_s, progress=progress)
    outcomes = []
    for variant in job.variants:
        progress.phase = f"evaluation of {variant.evaluator_name}"
        cache_dir = folder / variant.evaluator_name
        score = await evaluate(
            variant, client, cache=cache, context=context, last_action=declared, cache_dir=cache_dir
        )
        detail = None
        if score != job.expected and job.explain:
            progress.phase = f"explaining the score of {variant.evaluator_name}"
            detail = await explain_score(
                variant, client, cache=cache, context=context, cache_dir=cache_dir
            )
            progress.phase = f"evaluation of {variant.evaluator_name}"
        outcomes.append(
            Outcome(variant.task_id, variant.evaluator_name, job.expected, score, detail=detail)
        )
    return outcomes


class Diagnoser:
    """Saves a screenshot and the window list of a desktop whose golden job failed,
    into one folder per run that is created on the first failure and kept."""

    def __init__(self) -> None:
        self.folder: Path | None = None
        self.count = 0

    async def describe(self, job: Job, client: GuestClient | None, progress: Progress) -> str:
        text = f"during {progress.phase}"
        if client is None or job.golden is None:
            return text
        if self.folder is None:
            self.folder = Path(tempfile.mkdtemp(prefix="cua-rl-on-desktop-failures-"))
        self.count += 1  # one job may fail more than once in a run (repeated jobs)
        name = f"{self.count:03d}-{job.task.task_id}-{job.variants[0].evaluator_name}"
        stem = self.folder / re.sub(r"[^A-Za-z0-9_.-]", "_", name)
        try:
            async with asyncio.timeout(DIAGNOSE_TIMEOUT_S):
                png = await client.screenshot()
                shot = stem.with_suffix(".png")
                shot.write_bytes(png)
                windows = await client.execute(
                    "wmctrl -l; echo active:; xdotool getactivewindow getwindowname",
                    shell=True,
                    timeout=10.0,
                )
                stem.with_suffix(".windows.txt").write_text(windows.output + windows.error)
        except Exception as exc:  # a dead desktop: the phase alone must do
            return f"{text}; no screenshot: {type(exc).__name__}: {exc}"
        titles = [
            " ".join(line.split()[3:])
            for line in windows.output.splitlines()
            if line.startswith("0x")
        ]
        return f"{text}; screenshot {shot}; windows: {' | '.join(titles) or '(none)'}"


async def run_jobs(
    jobs: Sequence[Job],
    desktops: int = 1,
    provider_config: Any = None,
    cache_root: Path | None = None,
    on_done: Any = None,
    job_timeout_s: float = JOB_TIMEOUT_S,
) -> list[Outcome]:
    """Run jobs on a pool of `desktops` desktops of `provider_config` (default local
    ones), reset before each job, each within `job_timeout_s`.

    Task assets come from the cache at `cache_root` (an OSWorld run's, seeded by
    `cua-rl cache seed`), or a temporary one that downloads. `on_done(job, outcomes)`,
    if given, is called as each job ends (progress, a resumable report)."""
    from cua_rl.desktop.file_cache import FileCache
    from cua_rl.desktop.pool import DesktopPool
    from cua_rl.desktop.providers.factory import make_provider
    from cua_rl.desktop.providers.local.config import LocalProviderConfig

    provider = make_provider(provider_config or LocalProviderConfig(), owner_pid=os.getpid())
    queue: asyncio.Queue[tuple[int, Job]] = asyncio.Queue()
    for item in enumerate(jobs):
        queue.put_nowait(item)
    outcomes: list[Outcome] = []
    diagnoser = Diagnoser()

    async def run_one(pool: DesktopPool, work: Path, number: int, job: Job) -> list[Outcome]:
        progress = Progress()
        client: GuestClient | None = None
        async with pool.lease() as (handle, _):
            try:
                async with asyncio.timeout(job_timeout_s):
                    progress.phase = "reset"
                    _, client = await pool.reset(handle)
                    cache = FileCache(cache_root or work / "files")
                    done = await _run_job(
                        job, client, work, number, progress, cache, job_timeout_s / STEP_SHARE
                    )
            except Exception as exc:  # one job's failure is report lines, not a crash
                if isinstance(exc, TimeoutError) and not str(exc):
                    exc = TimeoutError(f"job not done within {job_timeout_s:.0f} s")
                text = f"{type(exc).__name__}: {exc}".strip().replace("\n", " | ")
                seen = await diagnoser.describe(job, client, progress)
                return [
                    Outcome(v.task_id, v.evaluator_name, job.expected, error=text, diagnostics=seen)
                    for v in job.variants
                ]
            if all(o.ok for o in done) or job.golden is None:
                return done
            seen = await diagnoser.describe(job, client, progress)
            return [o if o.ok else replace(o, diagnostics=seen) for o in done]

    async def worker(pool: DesktopPool, work: Path) -> None:
        while not queue.empty():
            number, job = queue.get_nowait()
            try:
                done = await run_one(pool, work, number, job)
            except Exception as exc:  # no desktop to lease: still one line per variant
                text = f"{type(exc).__name__}: {exc}".strip().replace("\n", " | ")
                done = [
                    Outcome(v.task_id, v.evaluator_name, job.expected, error=text)
                    for v in job.variants
                ]
            outcomes.extend(done)
            if on_done is not None:
                on_done(job, done)

    try:
        with tempfile.TemporaryDirectory(prefix="cua-rl-on-desktop-") as tmp:
            async with DesktopPool(provider, desktops) as pool:
                await asyncio.gather(*(worker(pool, Path(tmp)) for _ in range(desktops)))
    finally:
        await provider.close()
    return outcomes


def validate_on_desktop(
    groups: Sequence[Group],
    desktops: int = 1,
    provider_config: Any = None,
    golden_root: Path | None = None,
    cache_root: Path | None = None,
) -> Report:
    """Plan and run every job; the report holds one outcome per (variant, phase)."""
    began = time.monotonic()
    jobs, missing = plan_jobs(groups, golden_root)
    outcomes = asyncio.run(run_jobs(jobs, desktops, provider_config, cache_root)) if jobs else []
    return Report(outcomes=missing + outcomes, seconds=time.monotonic() - began)
