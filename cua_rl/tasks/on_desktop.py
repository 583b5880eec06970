"""`cua-rl templates validate --on-desktop`: prove every variant can be scored 0 and 1.

For each task in scope, on a local desktop:
1. reset, run the task's setup steps, score the untouched initial state with
   every variant's evaluator: each must give 0.0 (otherwise the task is
   already solved before the agent acts);
2. per variant: reset, setup, run the variant's golden solution, score: must
   give 1.0 (otherwise the evaluator cannot be satisfied, or the setup is wrong).

Golden solutions live in `<golden root>/golden/<domain>/<task id>.json` (the
project's: `osworld_tasks/local/`; an authoring root's: itself) as
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
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cua_rl.desktop.client import GuestClient
from cua_rl.desktop.setup_step_params import ExecuteParams
from cua_rl.errors import TaskFormatError
from cua_rl.tasks.golden_files import golden_path, read_golden
from cua_rl.types import Action, TaskVariant

Group = tuple[TaskVariant, list[TaskVariant]]
"""A base task and its variants (the task itself when it has no template)."""
JOB_TIMEOUT_S = 240.0
"""Deadline for one reset + setup + golden + evaluation (GIMP starts in ~5 s)."""
DIAGNOSE_TIMEOUT_S = 20.0
"""Deadline for the screenshot and window list taken when a golden job fails."""


@dataclass(frozen=True, slots=True)
class Job:
    """One desktop session: a task's setup, optionally one golden run, then scoring."""

    task: TaskVariant
    variants: tuple[TaskVariant, ...]
    """Variants scored at the end (all of them for the initial state)."""
    golden: tuple[dict[str, Any], ...] | None = None
    """Steps of the golden solution; None scores the untouched initial state."""
    explain: bool = True
    """On a score other than `expected`, re-run the metrics to say what they compared."""
    declared: str | None = None
    """The agent's last action, `terminate(status=<this>)` (an infeasible task's rule)."""

    @property
    def expected(self) -> float:
        return 0.0 if self.golden is None else 1.0


@dataclass(frozen=True, slots=True)
class Outcome:
    task_id: str
    variant: str
    expected: float
    score: float | None = None
    error: str | None = None
    diagnostics: str | None = None
    """Where the job was and what the screen showed when it failed (failures only)."""
    detail: str | None = None
    """Each metric's score and the values it compared (wrong scores only)."""

    @property
    def ok(self) -> bool:
        return self.error is None and self.score == self.expected

    def line(self) -> str:
        """One grep-able line per failure, as `templates validate` prints problems."""
        what = "golden" if self.expected == 1.0 else "initial state"
        if self.error is not None:
            text = f"{self.task_id}:{self.variant}: {what}: {self.error}"
        else:
            head = f"{self.task_id}:{self.variant}: {what}"
            text = f"{head} scored {self.score:g}, expected {self.expected:g}"
            if self.detail:
                text += f" ({self.detail})"
        return text if self.diagnostics is None else f"{text} [{self.diagnostics}]"


@dataclass(slots=True)
class Progress:
    """What a job is doing right now, so a failure (a timeout included) can say
    which phase or golden step was running."""

    phase: str = "lease"

    def golden_step(self, index: int, total: int, step: dict[str, Any]) -> None:
        (kind, value), = step.items()
        what = value.get("command") if isinstance(value, dict) else value
        text = " ".join(what) if isinstance(what, list) else str(what)
        text = " ".join(text.split())
        self.phase = f"golden[{index}/{total}] {kind}: {text[:120]}"


@dataclass(slots=True)
class Report:
    outcomes: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def failures(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.ok]


def plan_jobs(groups: Sequence[Group],
              golden_root: Path | None = None) -> tuple[list[Job], list[Outcome]]:
    """Jobs for (base task, variants) groups; variants without a golden solution
    become failures at once. The initial state is scored in one job per distinct
    postconfig: a postconfig may change the state the next evaluator reads, but
    variants with the same postconfig each run it right before their evaluation,
    so they read the same state as long as it is idempotent (the local suite's
    postconfigs only (re)generate expected files)."""
    jobs: list[Job] = []
    missing: list[Outcome] = []
    for task, variants in groups:
        try:
            golden = read_golden(task, golden_root)
        except TaskFormatError as exc:
            missing += [Outcome(v.task_id, v.evaluator_name, 1.0, error=str(exc)) for v in variants]
            continue
        by_postconfig: dict[str, list[TaskVariant]] = {}
        for v in variants:
            key = json.dumps(v.evaluator.get("postconfig") or [], sort_keys=True)
            by_postconfig.setdefault(key, []).append(v)
        jobs += [Job(task, tuple(same)) for same in by_postconfig.values()]
        for v in variants:
            if v.evaluator_name not in golden:
                missing.append(Outcome(v.task_id, v.evaluator_name, 1.0,
                                       error=f"no golden solution named {v.evaluator_name!r} "
                                             f"in {golden_path(task, golden_root)}"))
            else:
                jobs.append(Job(task, (v,), tuple(golden[v.evaluator_name])))
    return jobs, missing


async def run_golden(client: GuestClient, steps: Sequence[dict[str, Any]],
                     until_deadline_s: float = 60.0, progress: Progress | None = None) -> None:
    """Run golden steps in order; a failed action or command raises RuntimeError."""
    loop = asyncio.get_running_loop()
    for index, step in enumerate(steps):
        (kind, value), = step.items()
        at = f"golden[{index}] ({kind})"
        if progress is not None:
            progress.golden_step(index, len(steps), step)
        if kind == "sleep":
            await asyncio.sleep(float(value))
        elif kind == "pyautogui":
            result = await client.act(value, timeout=30.0)
            if result.status != "success":
                raise RuntimeError(f"{at}: {result.status}: {result.error or result.output}")
        else:
            params = ExecuteParams.model_validate(value)
            end = loop.time() + until_deadline_s
            while True:
                result = await client.execute(params.command, shell=params.shell, timeout=60.0)
                if params.until is None:
                    if not result.ok:
                        raise RuntimeError(f"{at}: exit {result.returncode}: "
                                           f"{(result.error or result.output).strip()[-300:]}")
                    break
                if result.status == "success" and params.until.met_by(result):
                    break
                if loop.time() >= end:
                    last = (result.error or result.output).strip()[-200:]
                    raise RuntimeError(f"{at}: 'until' not met within {until_deadline_s:.0f} s"
                                       + (f"; last output: {last}" if last else ""))
                await asyncio.sleep(0.2)


async def _run_job(job: Job, client: GuestClient, work: Path, number: int,
                   progress: Progress, cache: Any) -> list[Outcome]:
    """Setup, golden (if any) and scoring on a desktop that was just reset; task assets
    come from `cache` (a FileCache)."""
    from cua_rl.desktop.setup_steps import SetupContext, run_setup_steps
    from cua_rl.evaluation import evaluate
    from cua_rl.tasks.score_explain import explain_score

    folder = work / f"job-{number:04d}"
    width, height = await client.screen_size()
    context = SetupContext(screen_width=width, screen_height=height, strict=True,
                           output_dir=folder / "output")
    declared = None if job.declared is None else Action(kind="terminate", status=job.declared)
    progress.phase = "setup"
    await run_setup_steps(client, list(job.task.config), task_id=job.task.task_id,
                          cache=cache, context=context)
    if job.golden is not None:
        await run_golden(client, job.golden, progress=progress)
    outcomes = []
    for variant in job.variants:
        progress.phase = f"evaluation of {variant.evaluator_name}"
        cache_dir = folder / variant.evaluator_name
        score = await evaluate(variant, client, cache=cache, context=context,
                               last_action=declared, cache_dir=cache_dir)
        detail = None
        if score != job.expected and job.explain:
            progress.phase = f"explaining the score of {variant.evaluator_name}"
            detail = await explain_score(variant, client, cache=cache, context=context,
                                         cache_dir=cache_dir)
            progress.phase = f"evaluation of {variant.evaluator_name}"
        outcomes.append(Outcome(variant.task_id, variant.evaluator_name, job.expected, score,
                                detail=detail))
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
                windows = await client.execute("wmctrl -l; echo active:; "
                                               "xdotool getactivewindow getwindowname",
                                               shell=True, timeout=10.0)
                stem.with_suffix(".windows.txt").write_text(windows.output + windows.error)
        except Exception as exc:  # a dead desktop: the phase alone must do
            return f"{text}; no screenshot: {type(exc).__name__}: {exc}"
        titles = [" ".join(line.split()[3:]) for line in windows.output.splitlines()
                  if line.startswith("0x")]
        return f"{text}; screenshot {shot}; windows: {' | '.join(titles) or '(none)'}"


async def run_jobs(jobs: Sequence[Job], desktops: int = 1, provider_config: Any = None,
                   cache_root: Path | None = None,
                   on_done: Any = None) -> list[Outcome]:
    """Run jobs on a pool of `desktops` local desktops (reset before each job).

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
                async with asyncio.timeout(JOB_TIMEOUT_S):
                    progress.phase = "reset"
                    _, client = await pool.reset(handle)
                    cache = FileCache(cache_root or work / "files")
                    done = await _run_job(job, client, work, number, progress, cache)
            except Exception as exc:  # one job's failure is report lines, not a crash
                if isinstance(exc, TimeoutError) and not str(exc):
                    exc = TimeoutError(f"job not done within {JOB_TIMEOUT_S:.0f} s")
                text = f"{type(exc).__name__}: {exc}".strip().replace("\n", " | ")
                seen = await diagnoser.describe(job, client, progress)
                return [Outcome(v.task_id, v.evaluator_name, job.expected, error=text,
                                diagnostics=seen) for v in job.variants]
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
                done = [Outcome(v.task_id, v.evaluator_name, job.expected, error=text)
                        for v in job.variants]
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


def validate_on_desktop(groups: Sequence[Group], desktops: int = 1,
                        provider_config: Any = None, golden_root: Path | None = None,
                        cache_root: Path | None = None) -> Report:
    """Plan and run every job; the report holds one outcome per (variant, phase)."""
    began = time.monotonic()
    jobs, missing = plan_jobs(groups, golden_root)
    outcomes = (asyncio.run(run_jobs(jobs, desktops, provider_config, cache_root))
                if jobs else [])
    return Report(outcomes=missing + outcomes, seconds=time.monotonic() - began)


def suite_groups(suite: Path, templates_root: Path | None,
                 task_ids: Sequence[str] | None = None) -> list[Group]:
    """(task, variants) of the suite's tasks (all, or `task_ids`); malformed tasks
    or pairs raise TaskFormatError (the static checks report them in detail)."""
    from cua_rl.tasks.osworld import load_tasks
    from cua_rl.tasks.pairs import load_variants

    load = load_tasks(suite, task_ids, "PATHS")
    load.raise_for_problems()
    return [(task, load_variants(task, templates_root)) for task in load.tasks]


def print_report(report: Report, echo: Any) -> None:
    """Failure lines (stdout), then a summary line (stderr)."""
    for failure in report.failures:
        echo(failure.line())
    passed = len(report.outcomes) - len(report.failures)
    variants = len({(o.task_id, o.variant) for o in report.outcomes})
    echo(f"on desktop: {variants} variant(s), {passed}/{len(report.outcomes)} checks passed, "
         f"{len(report.failures)} failure(s) in {report.seconds:.0f} s", err=True)
