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

With `score_noop` the untouched desktop is then scored for a no-op agent that
declares success, then failure, at once (`cua_rl.tasks.noop_check`).
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cua_rl.desktop.file_cache import FileCache
from cua_rl.desktop.providers.base import DesktopHandle
from cua_rl.desktop.providers.local.provider import LocalProvider
from cua_rl.desktop.settle import OPENING_STEPS, is_blank, wait_until_settled
from cua_rl.desktop.setup_steps import SetupContext, run_setup_steps
from cua_rl.errors import DesktopError, GuestError, SetupStepError
from cua_rl.tasks.noop_check import NoopResult, score_noop_agent
from cua_rl.types import TaskVariant


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
    noop: NoopResult | None = None
    """The no-op agent's scores of the untouched desktop; None when not scored."""

    @property
    def ok(self) -> bool:
        return not self.error and not self.blank

    # The no-op agent's decisive score as one number: its success run on a feasible
    # task (must be 0), its failure run on an infeasible one (must be 1).
    @property
    def noop_score(self) -> float | None:
        if self.noop is None:
            return None
        return self.noop.failure_score if self.noop.infeasible else self.noop.success_score

    @property
    def standin_expected(self) -> bool:
        return self.noop is not None and self.noop.standin_expected

    @property
    def noop_wrong(self) -> bool:
        """The no-op agent's scores are not the ones a correct evaluator gives."""
        return self.noop is not None and bool(self.noop.wrong)


def opens_something(task: TaskVariant) -> bool:
    return any(step.get("type") in OPENING_STEPS for step in task.config)


async def _one(
    provider: LocalProvider,
    handle: DesktopHandle,
    task: TaskVariant,
    cache: FileCache,
    settle_max_s: float,
    score_noop: bool,
) -> tuple[SetupOutcome, DesktopHandle]:
    began = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="setup-check-"))
    try:
        handle = await provider.reset(handle)
        client = provider.client(handle)
        width, height = await client.screen_size()
        context = SetupContext(
            screen_width=width, screen_height=height, output_dir=work, strict=True
        )
        await run_setup_steps(
            client, list(task.config), task_id=task.task_id, cache=cache, context=context
        )
        opened = opens_something(task)
        settled = await wait_until_settled(
            lambda: client.screenshot("png"), max_s=settle_max_s, drawn=opened
        )
        blank = opened and is_blank(await client.screenshot("png"))
        noop = await score_noop_agent(task, client, cache, context, work) if score_noop else None
        return SetupOutcome(
            task.task_id,
            task.domain,
            blank=blank,
            settled=settled.settled,
            seconds=time.monotonic() - began,
            noop=noop,
        ), handle
    except (SetupStepError, GuestError, DesktopError) as exc:
        return SetupOutcome(
            task.task_id,
            task.domain,
            error=str(exc).splitlines()[0][:300],
            seconds=time.monotonic() - began,
        ), handle
    finally:
        await asyncio.to_thread(shutil.rmtree, work, True)


async def check_setups(
    tasks: Sequence[TaskVariant],
    provider: LocalProvider,
    cache: FileCache,
    *,
    desktops: int = 1,
    settle_max_s: float = 10.0,
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
                outcome, handle = await _one(
                    provider, handle, task, cache, settle_max_s, score_noop
                )
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
