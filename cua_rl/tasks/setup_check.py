"""`cua-rl tasks check --on-desktop`: run each task's setup on real local
desktops and report the setups that failed or left a blank first screen.

Every task yields exactly one `SetupOutcome`; a setup that raises (a step that
fails, a dead guest) becomes an outcome with the error text, never a crash of
the whole check, and a desktop whose guest died is replaced before the next
task. Setups run strict (a best-effort step that fails is a failure: that is
what the evaluation does), and the first screen is taken after the screen
settles, as an episode's is. A blank first screen only counts when the setup
opened something (`launch`, `open`, Chrome tabs): a setup of plain commands
leaves the empty desktop on purpose.

With `score_noop` the untouched desktop is then scored as after a no-op agent
that declares success at once: every feasible task must score 0 with its
metrics really run (an evaluator that passes an untouched desktop is a false
pass), and an agent that declares failure must score 1 on infeasible tasks.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cua_rl.desktop.client import GuestClient
from cua_rl.desktop.file_cache import FileCache
from cua_rl.desktop.providers.base import DesktopHandle
from cua_rl.desktop.providers.local import LocalProvider
from cua_rl.desktop.settle import OPENING_STEPS, is_blank, wait_until_settled
from cua_rl.desktop.setup_steps import SetupContext, run_setup_steps
from cua_rl.errors import DesktopError, GuestError, SetupStepError
from cua_rl.types import Action, TaskVariant


@dataclass(frozen=True, slots=True)
class SetupOutcome:
    task_id: str
    domain: str
    error: str = ""
    """Why the setup failed; empty when it ran."""
    blank: bool = False
    """The setup opened something, yet the settled first screen is one colour."""
    settled: bool = True
    seconds: float = 0.0
    noop_score: float | None = None
    """Score of the untouched desktop for an agent that declares success at once
    (failure, for infeasible tasks); None when not scored."""
    noop_expected: float | None = None
    """What that score must be: 0, or 1 for an infeasible task."""
    noop_error: str = ""
    standin_expected: bool = False
    """The evaluator compares against a downloaded file: with generated stand-in
    assets the expected file may equal the task's own input (reported apart)."""

    @property
    def ok(self) -> bool:
        return not self.error and not self.blank

    @property
    def noop_wrong(self) -> bool:
        """The no-op agent's score is not the one a correct evaluator gives."""
        return bool(self.noop_error) or (self.noop_score is not None
                                         and self.noop_score != self.noop_expected)


def opens_something(task: TaskVariant) -> bool:
    return any(step.get("type") in OPENING_STEPS for step in task.config)


def _expects_download(task: TaskVariant) -> bool:
    expected = task.evaluator.get("expected")
    items = expected if isinstance(expected, list) else [expected]
    return any(isinstance(g, dict) and g.get("type") == "cloud_file" for g in items)


async def _score_noop(task: TaskVariant, client: GuestClient, cache: FileCache,
                      context: SetupContext, work: Path) -> tuple[float | None, float, str]:
    """Evaluate the untouched desktop as OSWorld would after a no-op agent:
    one that declares success (failure for an infeasible task) at once."""
    from cua_rl.evaluation import evaluate

    infeasible = task.evaluator.get("func") == "infeasible"
    action = Action(kind="terminate", status="failure" if infeasible else "success")
    try:
        score = await evaluate(task, client, cache=cache, context=context, last_action=action,
                               cache_dir=work / "eval")
    except Exception as exc:  # any metric or getter failure is this task's finding
        return None, float(infeasible), f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
    return score, float(infeasible), ""


async def _one(provider: LocalProvider, handle: DesktopHandle, task: TaskVariant,
               cache: FileCache, settle_max_s: float,
               score_noop: bool) -> tuple[SetupOutcome, DesktopHandle]:
    began = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="setup-check-"))
    try:
        handle = await provider.reset(handle)
        client = provider.client(handle)
        width, height = await client.screen_size()
        context = SetupContext(screen_width=width, screen_height=height, output_dir=work,
                               strict=True)
        await run_setup_steps(client, list(task.config), task_id=task.task_id, cache=cache,
                              context=context)
        opened = opens_something(task)
        settled = await wait_until_settled(lambda: client.screenshot("png"), max_s=settle_max_s,
                                           drawn=opened)
        blank = opened and is_blank(await client.screenshot("png"))
        noop: tuple[float | None, float | None, str] = (None, None, "")
        if score_noop:
            noop = await _score_noop(task, client, cache, context, work)
        return SetupOutcome(task.task_id, task.domain, blank=blank, settled=settled.settled,
                            seconds=time.monotonic() - began, noop_score=noop[0],
                            noop_expected=noop[1], noop_error=noop[2],
                            standin_expected=_expects_download(task)), handle
    except (SetupStepError, GuestError, DesktopError) as exc:
        return SetupOutcome(task.task_id, task.domain, error=str(exc).splitlines()[0][:300],
                            seconds=time.monotonic() - began), handle
    finally:
        await asyncio.to_thread(shutil.rmtree, work, True)


async def check_setups(tasks: Sequence[TaskVariant], provider: LocalProvider, cache: FileCache,
                       *, desktops: int = 1, settle_max_s: float = 10.0,
                       score_noop: bool = False,
                       on_outcome: Callable[[SetupOutcome], None] | None = None,
                       ) -> list[SetupOutcome]:
    """Run every task's setup on `desktops` local desktops; outcomes in task order.
    With `score_noop`, also score the untouched desktop (`SetupOutcome.noop_score`)."""
    queue: asyncio.Queue[tuple[int, TaskVariant]] = asyncio.Queue()
    for item in enumerate(tasks):
        queue.put_nowait(item)
    outcomes: dict[int, SetupOutcome] = {}

    async def worker(index: int) -> None:
        handle = await provider.start(f"setup-check-{index}")
        try:
            while not queue.empty():
                position, task = queue.get_nowait()
                outcome, handle = await _one(provider, handle, task, cache, settle_max_s,
                                             score_noop)
                outcomes[position] = outcome
                if on_outcome is not None:
                    on_outcome(outcome)
        finally:
            await provider.stop(handle)

    async with asyncio.TaskGroup() as group:
        for index in range(max(1, min(desktops, len(tasks)))):
            group.create_task(worker(index))
    return [outcomes[i] for i in range(len(tasks))]


def stratified_sample(tasks: Sequence[TaskVariant], limit: int = 40) -> list[TaskVariant]:
    """At least one task per domain and per setup-step kind, and an infeasible
    one (greedy cover, in task order), at most `limit`."""
    chosen: list[TaskVariant] = []
    domains: set[str] = set()
    kinds: set[str] = set()
    for task in tasks:
        task_kinds = {str(step.get("type")) for step in task.config}
        if task.evaluator.get("func") == "infeasible":
            task_kinds.add("(infeasible)")
        if task.domain not in domains or task_kinds - kinds:
            chosen.append(task)
            domains.add(task.domain)
            kinds |= task_kinds
        if len(chosen) >= limit:
            break
    return chosen
