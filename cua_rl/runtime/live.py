"""A rich live summary of a training run in the terminal (only on a TTY)."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from rich.live import Live
from rich.table import Table


def _table(fleet: Any, learners: list[Any], selector: Any) -> Table:
    table = Table(title="cua-rl train", show_header=False)
    counts = fleet.counts
    for key in ("groups", "episodes", "steps", "parse_errors", "aborted", "successes"):
        table.add_row(key, str(int(counts.get(key, 0))))
    for service in learners:
        table.add_row(f"{service.role} version", str(service.version))
        table.add_row(f"{service.role} samples used / collected",
                      f"{service.samples_used} / {service.samples_collected}")
        table.add_row(f"{service.role} stale dropped", str(service.stale_dropped))
    table.add_row("pending adaptations", str(len(selector.pending)))
    return table


async def live_summary(enabled: bool, fleet: Any, learners: list[Any], selector: Any) -> None:
    """Refresh until cancelled; does nothing when disabled or not on a terminal."""
    if not enabled or not sys.stderr.isatty():
        await asyncio.Event().wait()
        return
    with Live(_table(fleet, learners, selector), refresh_per_second=2, transient=True) as live:
        while True:
            await asyncio.sleep(0.5)
            live.update(_table(fleet, learners, selector))
