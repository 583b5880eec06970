"""The figures of one soak (`bench soak`) from what it left: the samples, the run's
store and metrics.jsonl, the faults injected and the processes still alive.

Every key and how it is computed: docs/soak.md; the arithmetic lives in
`soak.windows` (windows, growth) and `soak.ledger` (lost, duplicated).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cua_rl.bench.soak.hostile import PROGRAMS as HOSTILE
from cua_rl.bench.soak.ledger import trajectories_lost, updates_duplicated
from cua_rl.bench.soak.windows import (
    dir_growth,
    faults_per_window,
    process_growth,
    ratio_last_over_first,
    throughput,
    window_bounds,
    window_resources,
)
from cua_rl.store.run_store import RunStore


def soak_figures(
    *,
    run_dir: Path,
    samples: list[dict[str, Any]],
    t0: float,
    stopped_at: float,
    window_s: float,
    faults: list[dict[str, Any]],
    group_size: int,
    left: dict[str, Any],
    stops: Sequence[float] = (),
) -> dict[str, Any]:
    """The soak's JSON (without the invocation's own keys: minutes, seed, paths).
    `t0`/`stopped_at`: epoch seconds of the run's start and of the stop request;
    `left`: `RunProcess.leftovers()` after the run ended; `stops`: epoch seconds of
    mid-soak stop requests (SIGTERM before a `--resume`)."""
    bounds = window_bounds(stopped_at - t0, window_s)
    store = RunStore.read_only(run_dir)
    try:
        records = store.trajectory_records()
    finally:
        store.close()
    windows = throughput(records, t0, bounds)
    for w, res, fw in zip(
        windows, window_resources(samples, bounds), faults_per_window(faults, bounds), strict=True
    ):
        w.update(res)
        w.update(fw)
    growth = process_growth(samples, bounds)
    lost = trajectories_lost(run_dir, group_size=group_size, stopped_at=stopped_at, stops=stops)
    duplicated = updates_duplicated(run_dir)
    return {
        "faults_injected": len(faults),
        "faults_recovered": sum(1 for f in faults if f.get("recovered")),
        "corrupt_screenshots_landed": sum(
            1
            for r in records
            if r["status"] == "aborted" and (r.get("error") or "").startswith("CorruptImageError")
        ),
        "hostile_contained": {
            outcome: sum(
                1
                for f in faults
                if f.get("kind") in HOSTILE and f.get("extra", {}).get("contained") is value
            )
            for outcome, value in (("held", True), ("broken", False), ("no_report", None))
        },
        "trajectories_lost": lost["total"],
        "updates_duplicated": duplicated["total"],
        "processes_left": [
            {"pid": pid, "cmd": cmd} for pid, cmd in sorted(left.get("processes", {}).items())
        ],
        "desktops_left": list(left.get("desktops", [])),
        "throughput_last_over_first": ratio_last_over_first(
            [w["finished_steps_per_min"] for w in windows]
        ),
        "rss_growth_mb": {name: g["rss_growth_mb"] for name, g in growth.items()},
        "windows": windows,
        "growth": growth,
        "run_dir_mb_per_h": dir_growth(samples, bounds),
        "run_dir_mb_at_end": samples[-1]["run_dir_mb"] if samples else {},
        "lost": lost,
        "updates": duplicated,
        "faults": faults,
        "samples": len(samples),
    }


def summary_lines(result: dict[str, Any]) -> str:
    """The headline figures as text (everything is in OUT/soak.json)."""
    lines = [
        f"soak: {result['minutes']} min, chaos {result['chaos']}/min, seed {result['seed']}"
        f", run exit {result['run_exit']} (stopped in {result['stop_s']} s)"
    ]
    for w in result["windows"]:
        lines.append(
            f"  window {w['index'] + 1} [{w['start_s']:.0f}-{w['end_s']:.0f} s]: "
            f"{w['finished_steps_per_min']:.1f} steps/min, {w['episodes']} episodes, "
            f"{w['aborted']} aborted, {w['faults_injected']} faults, rss "
            f"{w['rss_mb']} MB, fds {w['fds']}, run dir {w['run_dir_mb']} MB"
        )
    lines.append(
        f"faults injected {result['faults_injected']}, recovered "
        f"{result['faults_recovered']}; trajectories lost "
        f"{result['trajectories_lost']}; updates duplicated "
        f"{result['updates_duplicated']}; processes left "
        f"{len(result['processes_left'])}; throughput last/first "
        f"{result['throughput_last_over_first']}"
    )
    if any(result["hostile_contained"].values()):
        lines.append(
            "hostile programs in desktops: "
            + ", ".join(
                f"{n} {k.replace('_', ' ')}" for k, n in result["hostile_contained"].items()
            )
        )
    worst = sorted(result["growth"].items(), key=lambda kv: -kv[1]["rss_growth_mb"])[:5]
    for name, g in worst:
        lines.append(
            f"  {name}: rss {g['rss_mb_first']} -> {g['rss_mb_last']} MB "
            f"({g['rss_mb_per_h']:+.1f} MB/h), fds {g['fds_first']:.0f} -> "
            f"{g['fds_last']:.0f}, threads {g['threads_first']:.0f} -> "
            f"{g['threads_last']:.0f}"
        )
    lines.append(f"run dir MB/h: {result['run_dir_mb_per_h']}")
    return "\n".join(lines)
