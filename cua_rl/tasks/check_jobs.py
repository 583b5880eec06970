"""The jobs of an on-desktop check (`templates validate --on-desktop`, `tasks verify`)
and what they find: a `Job` scores a task's variants after its setup and, for a golden
job, after the golden solution; an `Outcome` is one variant's score or error, a
`Report` all of them. `plan_jobs` turns (task, variants) groups into jobs,
`suite_groups` reads those groups from a suite, `print_report` prints the report's
failure lines and its summary.

It is apart from tasks/on_desktop.py, which runs jobs on a pool of desktops (setup,
golden steps, scoring, the diagnosis of a failure): what to check and how it is
reported needs no desktop. `tasks verify` plans its own jobs with these types, and
authoring (`authoring_groups`) and the local suite's file tests read groups and plans
without starting one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cua_rl.errors import TaskFormatError
from cua_rl.tasks.golden_files import golden_path, read_golden
from cua_rl.types import TaskVariant

Group = tuple[TaskVariant, list[TaskVariant]]
"""A base task and its variants (the task itself when it has no template)."""


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
class Report:
    outcomes: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def failures(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.ok]


def plan_jobs(
    groups: Sequence[Group], golden_root: Path | None = None
) -> tuple[list[Job], list[Outcome]]:
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
                missing.append(
                    Outcome(
                        v.task_id,
                        v.evaluator_name,
                        1.0,
                        error=f"no golden solution named {v.evaluator_name!r} "
                        f"in {golden_path(task, golden_root)}",
                    )
                )
            else:
                jobs.append(Job(task, (v,), tuple(golden[v.evaluator_name])))
    return jobs, missing


def suite_groups(
    suite: Path, templates_root: Path | None, task_ids: Sequence[str] | None = None
) -> list[Group]:
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
    echo(
        f"on desktop: {variants} variant(s), {passed}/{len(report.outcomes)} checks passed, "
        f"{len(report.failures)} failure(s) in {report.seconds:.0f} s",
        err=True,
    )
