"""`cua-rl tasks verify`: prove OSWorld tasks end to end, one verdict per task.

A task is proven when both halves hold on fresh desktops: its setup followed by
its golden solution scores 1, and its setup followed by nothing scores 0. The
golden solutions are the project's (`cua_rl/tasks/data/osworld/golden/<domain>/<id>.json`,
the format and runner of `cua_rl.tasks.on_desktop`), so every getter, metric and
setup step we ship is exercised the way an evaluation run uses it.

Which tasks can be proven depends on what they are judged by:
- `rule`: the evaluator checks rules on the desktop's state (settings, files,
  tabs, app config). Every runnable one is attempted.
- `gold_file`: the result is compared with a gold file from the task set's
  assets (a `cloud_file` getter, or a file the postconfig downloads and the
  evaluator reads: a gold file, a checking script). With
  generated stand-in assets that comparison proves nothing, so these are
  `not_provable` unless `--real-assets` says the cache holds the real assets.
  So are the rule-judged tasks listed in the golden root's
  `needs_real_assets.json` ({task id: why}): their rule reads what only the
  real asset holds (a profile's messages, a project's files, a checking
  script), which a stand-in of the right type does not.
- `infeasible`: nothing can solve them; their rule is checked instead: setup
  then a declared failure scores 1, setup then nothing scores 0.

Statuses: `pass`, `fail_golden`, `fail_untouched`, `error` (a job raised: setup,
golden step, dead desktop), `not_provable`, `infeasible` (its rule held, or
`ok: false` with why not), `not_runnable` (`tasks check`'s reason). Verdicts are
appended to `verify.jsonl` as tasks finish, so an interrupted run resumes where
it stopped; a run over the same folder attempts again only the tasks that did not
pass (failed, errors, an infeasible rule that did not hold), which is the loop of
someone fixing golden solutions.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from cua_rl.errors import TaskFormatError
from cua_rl.tasks.check_jobs import Job, Outcome
from cua_rl.tasks.golden_files import golden_path, read_golden
from cua_rl.tasks.sources import DATA_ROOT
from cua_rl.types import TaskVariant

GOLDEN_ROOT = DATA_ROOT / "osworld"
"""The project's golden solutions for OSWorld task ids (`golden/<domain>/<id>.json`)."""
NEEDS_REAL_ASSETS = "needs_real_assets.json"
Kind = Literal["rule", "gold_file", "infeasible"]
Status = Literal[
    "pass", "fail_golden", "fail_untouched", "error", "not_provable", "infeasible", "not_runnable"
]
STATUSES: tuple[str, ...] = (
    "pass",
    "fail_golden",
    "fail_untouched",
    "error",
    "not_provable",
    "infeasible",
    "not_runnable",
)
ATTEMPTED = ("pass", "fail_golden", "fail_untouched", "error")
"""Statuses of a task that was attempted (the denominator of the pass rate)."""


def task_kind(task: TaskVariant) -> Kind:
    """What the task is judged by (module docstring)."""
    func = task.evaluator.get("func")
    if func == "infeasible" or (isinstance(func, list) and "infeasible" in func):
        return "infeasible"
    expected = task.evaluator.get("expected")
    items = expected if isinstance(expected, list) else [expected]
    if any(isinstance(g, dict) and g.get("type") == "cloud_file" for g in items):
        return "gold_file"
    read = json.dumps([task.evaluator.get("result"), expected])
    return "gold_file" if any(path in read for path in _postconfig_downloads(task)) else "rule"


def _postconfig_downloads(task: TaskVariant) -> list[str]:
    """Paths the evaluator's postconfig downloads to (a gold file, a checking script)."""
    return [
        f["path"]
        for step in task.evaluator.get("postconfig") or ()
        if isinstance(step, dict) and step.get("type") == "download"
        for f in (step.get("parameters") or {}).get("files") or ()
        if isinstance(f, dict) and isinstance(f.get("path"), str) and f["path"]
    ]


@dataclass(frozen=True, slots=True)
class Verdict:
    """One task's line of the report."""

    task_id: str
    domain: str
    kind: Kind
    status: Status
    reason: str = ""
    ok: bool = True
    """False only for an infeasible task whose rule did not hold."""

    def line(self) -> str:
        text = f"{self.status:<14} {self.domain}/{self.task_id}"
        return f"{text}  {self.reason}" if self.reason else text


@dataclass(frozen=True, slots=True)
class Plan:
    jobs: list[Job]
    decided: list[Verdict]
    """Tasks settled without a desktop (not runnable, not provable, no golden)."""
    pending: dict[str, TaskVariant]
    """Tasks with jobs, by id."""


def needs_real_assets(golden_root: Path = GOLDEN_ROOT) -> dict[str, str]:
    """{task id: why} of rule-judged tasks that stand-in assets cannot prove."""
    path = golden_root / NEEDS_REAL_ASSETS
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise TaskFormatError(f"{path}: not valid JSON: {exc}") from exc
    if not isinstance(data, dict) or not all(
        isinstance(v, str) and v.strip() for v in data.values()
    ):
        raise TaskFormatError(f"{path}: expected an object of task id -> reason (a string)")
    return data


def plan_verify(
    tasks: Sequence[TaskVariant],
    runnable: set[str],
    reasons: dict[str, str],
    golden_root: Path = GOLDEN_ROOT,
    real_assets: bool = False,
) -> Plan:
    """Two jobs per attempted task (untouched, then golden or declared failure)."""
    apart = {} if real_assets else needs_real_assets(golden_root)
    jobs: list[Job] = []
    decided: list[Verdict] = []
    pending: dict[str, TaskVariant] = {}
    for task in tasks:
        kind = task_kind(task)
        base = {"task_id": task.task_id, "domain": task.domain, "kind": kind}
        if task.task_id not in runnable:
            decided.append(
                Verdict(
                    **base,
                    status="not_runnable",
                    reason=reasons.get(task.task_id, "not runnable here"),
                )
            )
            continue
        untouched = Job(task, (task,), None)
        if kind == "infeasible":
            jobs += [untouched, Job(task, (task,), (), declared="failure")]
            pending[task.task_id] = task
            continue
        if kind == "gold_file" and not real_assets:
            decided.append(
                Verdict(
                    **base,
                    status="not_provable",
                    reason="compared with a gold file from the task set's "
                    "assets (--real-assets to attempt)",
                )
            )
            continue
        if task.task_id in apart:
            decided.append(
                Verdict(
                    **base,
                    status="not_provable",
                    reason=f"needs the real assets: {apart[task.task_id]}",
                )
            )
            continue
        try:
            golden = read_golden(task, golden_root)
        except TaskFormatError as exc:
            reason = (
                f"no golden solution ({golden_path(task, golden_root)})"
                if not golden_path(task, golden_root).is_file()
                else str(exc)
            )
            decided.append(Verdict(**base, status="fail_golden", reason=reason))
            continue
        steps = golden.get(task.evaluator_name)
        if steps is None:
            decided.append(
                Verdict(
                    **base,
                    status="fail_golden",
                    reason=f"{golden_path(task, golden_root)}: no solution "
                    f"named {task.evaluator_name!r}",
                )
            )
            continue
        jobs += [untouched, Job(task, (task,), tuple(steps))]
        pending[task.task_id] = task
    return Plan(jobs, decided, pending)


def _half(outcome: Outcome) -> str:
    """The outcome's line without its `task:variant: ` prefix (the verdict names the task)."""
    return outcome.line().split(": ", 1)[-1]


def combine(task: TaskVariant, untouched: Outcome, solved: Outcome) -> Verdict:
    """The verdict of a task from its two outcomes (`solved`: golden or declared failure)."""
    kind = task_kind(task)
    base = {"task_id": task.task_id, "domain": task.domain, "kind": kind}
    failed = [o for o in (untouched, solved) if not o.ok]
    reason = "; ".join(_half(o) for o in failed)
    if kind == "infeasible":
        return Verdict(
            **base,
            status="infeasible",
            ok=not failed,
            reason=reason or "declared failure scores 1, untouched 0",
        )
    if not failed:
        return Verdict(**base, status="pass")
    if any(o.error is not None for o in failed):
        return Verdict(**base, status="error", reason=reason)
    return Verdict(
        **base, reason=reason, status="fail_untouched" if not untouched.ok else "fail_golden"
    )


class Ledger:
    """`verify.jsonl` of an output folder: verdicts appended as tasks finish."""

    def __init__(self, folder: Path, fresh: bool = False) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / "verify.jsonl"
        if fresh and self.path.exists():
            self.path.unlink()
        self.done: dict[str, Verdict] = {}
        if self.path.exists():
            for number, line in enumerate(self.path.read_text().splitlines(), 1):
                try:
                    row = json.loads(line)
                    verdict = Verdict(**row)
                except (ValueError, TypeError) as exc:  # a torn last line after a kill
                    raise TaskFormatError(
                        f"{self.path}:{number}: not a verdict ({exc}); "
                        "delete the line or pass --fresh"
                    ) from None
                self.done[verdict.task_id] = verdict

    def settled(self, task_id: str) -> bool:
        """Decided for good: passed, or an infeasible task whose rule held. A task set
        apart (not runnable, not provable) is decided again, without a desktop, on
        every run: the machine may have gained the app, package or assets it lacked."""
        verdict = self.done.get(task_id)
        return verdict is not None and verdict.ok and verdict.status in ("pass", "infeasible")

    def add(self, verdict: Verdict) -> None:
        self.done[verdict.task_id] = verdict
        with self.path.open("a") as out:
            out.write(json.dumps(asdict(verdict)) + "\n")


def summarize(verdicts: Iterable[Verdict], seconds: float) -> dict[str, Any]:
    """The `--json` shape: counts, per-domain rows and every task's verdict."""
    rows = sorted(verdicts, key=lambda v: (v.domain, v.task_id))
    statuses = {s: sum(v.status == s for v in rows) for s in STATUSES}
    per_domain: dict[str, dict[str, int]] = {}
    for v in rows:
        row = per_domain.setdefault(
            v.domain, {"tasks": 0, "attempted": 0, "pass": 0, "not_provable": 0, "infeasible": 0}
        )
        row["tasks"] += 1
        row["attempted"] += v.status in ATTEMPTED
        row["pass"] += v.status == "pass"
        row["not_provable"] += v.status == "not_provable"
        row["infeasible"] += v.status == "infeasible"
    attempted = sum(v.status in ATTEMPTED for v in rows)
    return {
        "tasks": len(rows),
        "attempted": attempted,
        "passed": statuses["pass"],
        "pass_rate": round(statuses["pass"] / attempted, 4) if attempted else None,
        "infeasible_ok": sum(v.status == "infeasible" and v.ok for v in rows),
        "statuses": statuses,
        "per_domain": per_domain,
        "seconds": round(seconds, 1),
        "verdicts": [asdict(v) for v in rows],
    }


def markdown(summary: dict[str, Any]) -> str:
    """The report people read: per-domain table, then every task not passing."""
    where = (
        f" on {summary['provider']} desktops ({summary['image']})" if "provider" in summary else ""
    )
    lines = [
        "# tasks verify",
        "",
        f"{summary['passed']} of {summary['attempted']} attempted tasks pass both halves "
        f"(golden scores 1, untouched 0){where}; {summary['infeasible_ok']} infeasible "
        f"tasks keep their rule; {summary['seconds']:.0f} s.",
        "",
        "| domain | tasks | attempted | pass | not provable | infeasible |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for domain, row in summary["per_domain"].items():
        lines.append(
            f"| {domain} | {row['tasks']} | {row['attempted']} | {row['pass']} | "
            f"{row['not_provable']} | {row['infeasible']} |"
        )
    failing = [
        v
        for v in summary["verdicts"]
        if v["status"] in ("fail_golden", "fail_untouched", "error")
        or (v["status"] == "infeasible" and not v["ok"])
    ]
    if failing:
        lines += ["", "## Not passing", ""]
        lines += [f"- `{v['domain']}/{v['task_id']}` {v['status']}: {v['reason']}" for v in failing]
    return "\n".join(lines) + "\n"
