"""The no-op agent check (`cua-rl tasks check --on-desktop --noop-agent`): score a
task's untouched desktop, right after its setup, for an agent that does nothing.

Two evaluations per task, both through `evaluate` as an episode's would be:

1. the agent ends at once with `terminate(status=success)`: every task must
   score 0 (the metrics really run; an evaluator that passes an untouched
   desktop is a false pass: a lock-screen setting that reads back its default,
   a VLC that is already the default player). An infeasible task scores 0 too;
2. the agent ends at once with `terminate(status=failure)`: exactly the
   infeasible tasks must score 1, every other task 0.

The second evaluation runs the evaluator without its `postconfig`: with a
declared failure OSWorld's scoring never reads the desktop (`infeasible` scores
1, anything else 0), while running the postconfig a second time (close a
window, save a file) could fail on the state the first run left.

Tasks whose evaluator reads a downloaded file (a `cloud_file` getter, a
`download` step in the postconfig) are reported apart when
they pass the first run: with generated stand-in assets (tests_support's asset
helper, `cua-rl cache seed`) the expected file may equal the task's own input.
Such a task whose postconfig itself writes the result file by typing its name
into the app (GIMP's tasks: Shift+Ctrl+E, the name, Enter) is reported apart
whatever it scores: its keystrokes go to whichever window has the focus (its
`activate_window` names a title GIMP does not use), so a 0 may only mean the
export never happened and the metric read a missing file, while after an
agent's clicks the export of the untouched image passes against the stand-in.
Every task yields one `NoopResult`; an evaluation that raises is its `error`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from cua_rl.types import Action, TaskVariant

if TYPE_CHECKING:
    from cua_rl.desktop.client import GuestClient
    from cua_rl.desktop.file_cache import FileCache
    from cua_rl.desktop.setup_context import SetupContext


@dataclass(frozen=True, slots=True)
class NoopResult:
    task_id: str
    infeasible: bool
    success_score: float | None = None
    """Score when the no-op agent declares success (must be 0)."""
    failure_score: float | None = None
    """Score when it declares failure (must be 1 on infeasible tasks, else 0)."""
    standin_expected: bool = False
    """The evaluator compares against a downloaded (here: generated stand-in) file."""
    exported_by_postconfig: bool = False
    """The evaluator's postconfig writes the result file by keystrokes."""
    error: str = ""
    detail: str = ""
    """Each metric's score and values, when the success run did not score 0."""

    @property
    def wrong(self) -> str:
        """Why this task's evaluator is wrong for a no-op agent; empty when right."""
        if self.error:
            return f"evaluation failed: {self.error}"
        reasons = []
        if self.success_score != 0.0:
            reasons.append(
                f"scored {self.success_score:g} when the no-op agent declared "
                "success (expected 0)" + (f": {self.detail}" if self.detail else "")
            )
        if self.failure_score != float(self.infeasible):
            reasons.append(
                f"scored {self.failure_score:g} when it declared failure "
                f"(expected {float(self.infeasible):g})"
            )
        return "; ".join(reasons)

    @property
    def standin_apart(self) -> bool:
        """Reported apart, not judged: the expected file is a stand-in and either the
        untouched desktop passed against it, or the postconfig writes the result by
        keystrokes, so the success run's score says nothing either way (module doc)."""
        return (
            self.standin_expected
            and not self.error
            and self.failure_score == float(self.infeasible)
            and (self.success_score != 0.0 or self.exported_by_postconfig)
        )

    @property
    def apart_reason(self) -> str:
        """Why a `standin_apart` task is set apart: its scores and compared values."""
        if self.success_score != 0.0:
            return self.wrong
        return (
            "scored 0 when the no-op agent declared success, but the postconfig "
            "writes the result file by keystrokes and the expected file is a stand-in"
            + (f": {self.detail}" if self.detail else "")
        )


def expects_download(task: TaskVariant) -> bool:
    """The evaluator reads a downloaded file: a `cloud_file` getter, or a `download`
    step in its postconfig (a gold file, a helper script). With stand-in assets
    such a file is generated, so a pass on the untouched desktop says nothing."""
    expected = task.evaluator.get("expected")
    items = expected if isinstance(expected, list) else [expected]
    if any(isinstance(g, dict) and g.get("type") == "cloud_file" for g in items):
        return True
    return any(
        isinstance(step, dict) and step.get("type") == "download"
        for step in task.evaluator.get("postconfig") or ()
    )


def _result_stems(task: TaskVariant) -> list[str]:
    """Names without extension of the files the evaluator's `vm_file` getters read."""
    result = task.evaluator.get("result")
    stems = []
    for getter in result if isinstance(result, list) else [result]:
        if isinstance(getter, dict) and getter.get("type") == "vm_file":
            paths = getter.get("path")
            for path in paths if isinstance(paths, list) else [paths]:
                if isinstance(path, str) and path:
                    stems.append(PurePosixPath(path).stem)
    return stems


def exports_by_keystrokes(task: TaskVariant) -> bool:
    """The evaluator's postconfig writes its result file itself, by typing the file's
    name into the app with pyautogui (an export dialog): whether that file exists
    then depends on the window that has the focus when the postconfig runs."""
    stems = _result_stems(task)
    for step in task.evaluator.get("postconfig") or ():
        if not isinstance(step, dict) or step.get("type") not in ("execute", "command"):
            continue
        command = (step.get("parameters") or {}).get("command")
        text = " ".join(map(str, command)) if isinstance(command, list) else str(command)
        if "pyautogui" in text and any(f'"{s}' in text or f"'{s}" in text for s in stems):
            return True
    return False


def _first_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:300]


async def score_noop_agent(
    task: TaskVariant, client: GuestClient, cache: FileCache, context: SetupContext, work: Path
) -> NoopResult:
    """Both evaluations of the module doc on the desktop `task` was just set up on."""
    from dataclasses import replace

    from cua_rl.evaluation import evaluate
    from cua_rl.tasks.score_explain import explain_score

    infeasible = task.evaluator.get("func") == "infeasible"
    exported = exports_by_keystrokes(task)
    base: dict[str, Any] = {
        "task_id": task.task_id,
        "infeasible": infeasible,
        "standin_expected": expects_download(task),
        "exported_by_postconfig": exported,
    }
    success = Action(kind="terminate", status="success")
    failure = Action(kind="terminate", status="failure")
    try:
        success_score = await evaluate(
            task,
            client,
            cache=cache,
            context=context,
            last_action=success,
            cache_dir=work / "noop-success",
        )
        detail = ""
        if success_score != 0.0 or exported:  # a 0 from a missing export is shown too
            detail = await explain_score(
                task, client, cache=cache, context=context, cache_dir=work / "noop-success"
            )
        declared = replace(
            task, evaluator={k: v for k, v in task.evaluator.items() if k != "postconfig"}
        )
        failure_score = await evaluate(
            declared,
            client,
            cache=cache,
            context=context,
            last_action=failure,
            cache_dir=work / "noop-failure",
        )
    except Exception as exc:  # any getter, metric or postconfig failure is this task's finding
        return NoopResult(**base, error=_first_line(exc))
    return NoopResult(
        **base, success_score=success_score, failure_score=failure_score, detail=detail
    )


def noop_report(results: list[NoopResult]) -> dict[str, Any]:
    """The JSON section of `tasks check --noop-agent`: offenders by task id and reason."""
    offenders = {r.task_id: r.wrong for r in results if r.wrong and not r.standin_apart}
    return {
        "checked": len(results),
        "infeasible": sum(r.infeasible for r in results),
        "success_run_scored_0": sum(r.success_score == 0.0 for r in results),
        "failure_run_scored_1": sorted(r.task_id for r in results if r.failure_score == 1.0),
        "offenders": offenders,
        "standin_expected": {r.task_id: r.apart_reason for r in results if r.standin_apart},
    }
