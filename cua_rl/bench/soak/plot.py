"""`OUT/soak.png`: the soak over time, so growth and dips are seen at a glance.

Four panels sharing the time axis (minutes since the run started): finished steps
per minute (per minute of the run and per window), RSS of the largest processes
and of all together, open fds and threads of all the run's processes, the run
directory's size by part. Every fault injected is a vertical mark on each panel
(solid: recovered, dotted: not). Imported only by `bench soak` (matplotlib).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from cua_rl.bench.soak.windows import latest_names, process_key
from cua_rl.report.plots import BASE_COLOR, HIGHLIGHT_COLOR, save_figure

TOP_PROCESSES = 6
FAULT_COLORS = {
    "policy_replica_kill": "#C44E52",
    "prm_replica_kill": "#8172B3",
    "guest_kill": "#55A868",
    "xvfb_kill": "#937860",
    "sigterm_resume": "#000000",
    "corrupt_screenshot": "#DA8BC3",
    "policy_replica_hang": "#DD8452",
    "prm_replica_hang": "#4C72B0",
}


def _style(ax: Any) -> None:
    ax.set_axisbelow(True)
    ax.grid(axis="y", color="#dddddd", linewidth=0.8)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def per_minute(records: list[dict[str, Any]], t0: float, end_s: float) -> list[float]:
    """Finished steps (good trajectories) in each whole minute of the run (a last
    part-minute is left out: its count would read as a drop)."""
    bins = [0.0] * max(1, int(end_s // 60))
    for r in records:
        t = float(r["finished_at"]) - t0
        if 0 <= t < 60 * len(bins) and r["status"] not in ("aborted", "setup_failed"):
            bins[int(t // 60)] += int(r["n_steps"])
    return bins


def plot_soak(
    out_path: Path,
    samples: list[dict[str, Any]],
    records: list[dict[str, Any]],
    result: dict[str, Any],
    t0: float,
) -> Path:
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(4, 1, figsize=(9, 10), dpi=110, sharex=True)
    for ax in axes:
        _style(ax)
    ts = [s["t"] / 60 for s in samples]
    end_s = max([w["end_s"] for w in result["windows"]] or [samples[-1]["t"] if samples else 60])

    ax = axes[0]
    bins = per_minute(records, t0, end_s)
    ax.step(
        range(len(bins) + 1),
        [*bins, bins[-1]],
        where="post",
        color=BASE_COLOR,
        alpha=0.5,
        label="per minute",
    )
    for w in result["windows"]:
        ax.hlines(
            w["finished_steps_per_min"],
            w["start_s"] / 60,
            w["end_s"] / 60,
            color=HIGHLIGHT_COLOR,
            linewidth=2.5,
        )
    ax.plot([], [], color=HIGHLIGHT_COLOR, linewidth=2.5, label="per window")
    ax.set_ylabel("finished steps / min")
    ax.legend(loc="upper left", fontsize=8, frameon=False)

    ax = axes[1]
    rss: dict[tuple[int, float], dict[float, float]] = defaultdict(dict)
    for s in samples:
        for p in s["processes"]:
            rss[process_key(p)][s["t"] / 60] = p["rss_mb"]
    names = latest_names(samples)
    # the largest by RSS summed over the samples: long-lived big processes, not a
    # short-lived one's peak
    for key in sorted(rss, key=lambda k: -sum(rss[k].values()))[:TOP_PROCESSES]:
        xs = sorted(rss[key])
        ax.plot(xs, [rss[key][x] for x in xs], linewidth=1, label=names[key])
    ax.plot(
        ts,
        [sum(p["rss_mb"] for p in s["processes"]) for s in samples],
        color="black",
        linewidth=1.5,
        label="all the run's processes",
    )
    ax.set_ylabel("RSS (MB)")
    ax.legend(loc="center left", fontsize=6, frameon=False, ncol=2)

    ax = axes[2]
    ax.plot(
        ts,
        [sum(p["fds"] for p in s["processes"]) for s in samples],
        color=BASE_COLOR,
        label="open fds",
    )
    ax.plot(
        ts,
        [sum(p["threads"] for p in s["processes"]) for s in samples],
        color=HIGHLIGHT_COLOR,
        label="threads",
    )
    ax.plot(ts, [len(s["processes"]) for s in samples], color="#55A868", label="processes")
    ax.set_ylabel("count (all processes)")
    ax.legend(loc="center left", fontsize=7, frameon=False, ncol=3)

    ax = axes[3]
    parts = [k for k in (samples[-1]["run_dir_mb"] if samples else {}) if k != "total"]
    for part in parts:
        ax.plot(ts, [s["run_dir_mb"].get(part, 0.0) for s in samples], linewidth=1, label=part)
    ax.plot(
        ts, [s["run_dir_mb"]["total"] for s in samples], color="black", linewidth=1.5, label="total"
    )
    ax.set_ylabel("run directory (MB)")
    ax.set_xlabel("minutes since the run started")
    ax.legend(loc="center left", fontsize=7, frameon=False, ncol=3)

    for fault in result["faults"]:
        for ax in axes:
            ax.axvline(
                fault["t"] / 60,
                color=FAULT_COLORS.get(fault["kind"], "grey"),
                linestyle="-" if fault.get("recovered") else ":",
                linewidth=0.8,
                alpha=0.8,
            )
    kinds = sorted({f["kind"] for f in result["faults"]})
    for kind in kinds:
        axes[0].plot([], [], color=FAULT_COLORS.get(kind, "grey"), linewidth=0.8, label=kind)
    if kinds:
        axes[0].legend(loc="upper left", fontsize=7, frameon=False, ncol=3)
    fig.suptitle(
        f"soak: {result['minutes']} min, {result['faults_injected']} faults "
        f"({result['faults_recovered']} recovered), seed {result['seed']}",
        fontsize=10,
    )
    return save_figure(fig, out_path)
