"""Step labels a task writes itself: its progress probe, read after every step.

A task opts in with `step_progress` in its JSON (`TaskVariant.step_progress`): a
command, run on the desktop, whose output's last line is how many of the task's
sub-goals are done (the tiles task: how many tiles are lit). The episode reads it
after setup and after each step; step i is labelled +1 when the count rose during
it and -1 otherwise, and the labels are stored as the trajectory's `step_labels`
event (store/step_labels.py), which `cua-rl eval-prm` reads as the targets of
process accuracy. A probe that cannot be read (a failed command, output that is not
a number) leaves that step unlabelled (null), never the episode aborted; a desktop
that is gone aborts the episode as any other guest call does.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Protocol

from cua_rl.store.async_run_store import AsyncRunStore
from cua_rl.store.step_labels import write_step_labels

log = logging.getLogger(__name__)


class ProgressDesktop(Protocol):
    """A desktop that can run a task's progress probe."""

    async def read_progress(self, probe: dict[str, Any]) -> int | None: ...


def parse_count(output: str) -> int | None:
    """The count in a probe's output (its last non-empty line), or None."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    if not lines:
        return None
    try:
        value = int(lines[-1])
    except ValueError:
        return None
    return value if value >= 0 else None


def labels_from_counts(counts: Sequence[int | None]) -> list[int | None]:
    """Step i's label from the counts before and after it (`counts[0]`: after setup):
    +1 if the count rose, -1 if it did not, None if either is unknown."""
    return [
        None if before is None or after is None else (1 if after > before else -1)
        for before, after in zip(counts, counts[1:], strict=False)
    ]


class StepProgress:
    """The counts of one episode, and the labels they give at its end."""

    def __init__(self, desktop: object, probe: dict[str, Any] | None, task_id: str) -> None:
        reader = getattr(desktop, "read_progress", None)
        self.reader = reader if probe is not None and callable(reader) else None
        self.probe = probe or {}
        self.task_id = task_id
        self.counts: list[int | None] = []

    @property
    def active(self) -> bool:
        return self.reader is not None

    async def read(self) -> None:
        """Read the probe once more (after setup, then after each step)."""
        if self.reader is not None:
            self.counts.append(await self.reader(self.probe))

    async def store(self, store: AsyncRunStore, trajectory_id: str, steps: int) -> None:
        """Write the episode's labels (one per step) as its `step_labels` event."""
        if self.reader is None or not steps:
            return
        labels = labels_from_counts(self.counts)[:steps]
        labels += [None] * (steps - len(labels))
        if all(label is None for label in labels):
            log.warning(
                "%s: the task's progress probe gave no count; no step labels for trajectory %s",
                self.task_id,
                trajectory_id,
            )
        await store.call(
            write_step_labels,
            store.sync,
            trajectory_id,
            labels,
            f"task progress probe ({self.task_id})",
        )
