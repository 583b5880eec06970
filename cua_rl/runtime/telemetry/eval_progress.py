"""The progress of `cua-rl eval` on stderr: a rich bar of task runs scored and the
mean score so far, or, off a terminal (where a bar shows nothing until the end),
one status line per scored task run."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from statistics import fmean
from typing import Any

status_log = logging.getLogger("cua_rl.status")


class ProgressBar:
    """A rich progress bar: task runs scored / in scope and the mean score so far
    (stored runs included, so a resumed evaluation starts where it stopped)."""

    def __init__(self, console: Any) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.progress = Progress(
            TextColumn("[bold]eval[/] task runs"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("mean score {task.fields[mean]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
        )
        self.scores: list[float] = []
        self.task_id: Any = None
        self.total = 0
        self.lines = not console.is_terminal
        """Off a terminal the bar shows nothing until the end: log a status line per
        scored task run instead."""
        self.started = time.monotonic()
        self.resumed = 0

    def _mean(self) -> str:
        return f"{fmean(self.scores):.3f}" if self.scores else "–"

    def start(self, total: int, done_scores: Sequence[float]) -> None:
        self.scores = list(done_scores)
        self.total, self.resumed, self.started = total, len(self.scores), time.monotonic()
        self.task_id = self.progress.add_task(
            "eval", total=total, completed=len(self.scores), mean=self._mean()
        )

    def advance(self, group_id: str, score: float) -> None:
        self.scores.append(score)
        self.progress.update(self.task_id, advance=1, mean=self._mean())
        if self.lines:
            from cua_rl.runtime.telemetry.progress import duration

            done, elapsed = len(self.scores), time.monotonic() - self.started
            now = done - self.resumed
            eta = elapsed / now * (self.total - done) if now else None
            status_log.info(
                "[eval] %d/%d task runs scored, mean score %s, %s elapsed, eta=%s",
                done,
                self.total,
                self._mean(),
                duration(elapsed),
                duration(eta),
            )
