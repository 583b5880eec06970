"""What a training run shows while it goes: a rich live table on a terminal, a
periodic one-line status in the log otherwise (progress.py builds both from one
snapshot)."""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import Any

from rich.live import Live
from rich.table import Table

from cua_rl.config.train import MetricsConfig
from cua_rl.runtime.telemetry.progress import ProgressSnapshot, RunProgress, duration

status_log = logging.getLogger("cua_rl.status")


def _table(snap: ProgressSnapshot, learners: list[Any], selector: Any) -> Table:
    table = Table(title=f"cua-rl train [{snap.phase}]", show_header=False)
    for key in ("groups", "episodes", "steps", "aborted", "successes"):
        table.add_row(key, str(getattr(snap, key)))
    table.add_row(
        "rates", f"{snap.episodes_per_min:.1f} episodes/min, {snap.steps_per_s:.2f} steps/s"
    )
    table.add_row("success rate", "-" if snap.success_rate is None else f"{snap.success_rate:.2f}")
    table.add_row(
        "mean step reward",
        "-" if snap.step_reward_mean is None else f"{snap.step_reward_mean:+.3f}",
    )
    for service in learners:
        table.add_row(
            f"{service.role} version",
            f"{service.version} / {snap.max_updates}"
            if service.role == "policy"
            else str(service.version),
        )
        table.add_row(
            f"{service.role} samples used / collected",
            f"{service.samples_used} / {service.samples_collected}",
        )
        table.add_row(f"{service.role} stale dropped", str(service.stale_dropped))
    table.add_row("pending adaptations", str(len(selector.pending)))
    table.add_row("elapsed / ETA", f"{duration(snap.elapsed_s)} / {duration(snap.eta_s)}")
    return table


async def live_summary(
    cfg: MetricsConfig, progress: RunProgress, learners: list[Any], selector: Any
) -> None:
    """Refresh until cancelled: the table when `cfg.live` and stderr is a terminal,
    else a status line every `cfg.status_interval_s` (0: none)."""
    if cfg.live and sys.stderr.isatty():
        with Live(
            _table(progress.snapshot(), learners, selector), refresh_per_second=2, transient=True
        ) as live:
            while True:
                await asyncio.sleep(0.5)
                live.update(_table(progress.snapshot(), learners, selector))
    await status_lines(cfg.status_interval_s, progress)


async def status_lines(interval_s: float, progress: RunProgress) -> None:
    """Log the one-line status every `interval_s` seconds until cancelled (0: never)."""
    if interval_s <= 0:
        await asyncio.Event().wait()
        return
    while True:
        await asyncio.sleep(interval_s)
        status_log.info("%s", progress.snapshot().line())
