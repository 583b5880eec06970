"""Learning curves of a training run as PNG files, in the report house style.

Every curve is read from what the run store actually records: outcomes, votes,
step counts, versions and timestamps of trajectories. A curve whose data the
run never recorded is not drawn; `write_curves` says why instead, so an empty
or flat plot is never mistaken for a result. The store is opened read-only,
so curves can be drawn while the run is still writing.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from cua_rl.report.plots import (
    BASE_COLOR,
    HIGHLIGHT_COLOR,
    jitter,
    new_figure,
    point_style,
    save_figure,
)
from cua_rl.reward.advantages import step_rewards
from cua_rl.viewer.queries import open_readonly, run_reward


@dataclass
class CurvesResult:
    written: dict[str, Path] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    """Curve name -> why it was not drawn."""


@dataclass
class RunSeries:
    """Per scored trajectory (aborted ones excluded), in finishing order."""

    outcomes: list[int] = field(default_factory=list)
    mean_rewards: list[float | None] = field(default_factory=list)
    agreement: list[float | None] = field(default_factory=list)
    """Fraction of the trajectory's votes whose sign matches its outcome."""
    lag: list[int] = field(default_factory=list)
    """Newest policy version seen by then minus the version the rollout started on."""
    max_version: int = 0
    stale_dropped: float = 0.0
    step_times: list[tuple[float, float, int]] = field(default_factory=list)
    """(started_at, finished_at, n_steps) of every trajectory, aborted included:
    work done is work done."""
    start: float | None = None


def rolling_mean(values: Sequence[float], window: int) -> np.ndarray:
    """Trailing mean over up to `window` points (shorter at the start, so the curve
    begins at the first trajectory instead of after a warm-up gap)."""
    x = np.asarray(values, dtype=float)
    csum = np.cumsum(np.insert(x, 0, 0.0))
    idx = np.arange(1, len(x) + 1)
    lo = np.maximum(idx - window, 0)
    return (csum[idx] - csum[lo]) / (idx - lo)


def default_window(n: int) -> int:
    """About a tenth of the points, between 5 and 100; 1 (no smoothing) below 10
    points, where a trailing mean would mostly show its own warm-up."""
    return 1 if n < 10 else int(min(100, max(5, n // 10)))


X_LABEL = "trajectory # (in finishing order)"


def spread_steps(times: Sequence[tuple[float, float, int]], edges: np.ndarray) -> np.ndarray:
    """Steps per time bin, each trajectory's steps spread evenly over its duration:
    steps are only timestamped through their episode, and counting them all at the
    finish would show bursts that no desktop ever produced."""
    out = np.zeros(len(edges) - 1)
    lo, hi = edges[:-1], edges[1:]
    for start, end, n in times:
        if end <= start:
            out[min(max(np.searchsorted(edges, end, side="right") - 1, 0), len(out) - 1)] += n
            continue
        overlap = np.clip(np.minimum(hi, end) - np.maximum(lo, start), 0.0, None)
        out += n * overlap / (end - start)
    return out


def load_series(conn: sqlite3.Connection) -> RunSeries:
    reward = run_reward(conn)  # the policy's R_i (Eq. 1), as the learner computed it
    votes: dict[str, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    for tid, idx, score in conn.execute(
        "SELECT trajectory_id, step_index, score FROM votes ORDER BY trajectory_id, step_index"
    ):
        votes[tid][idx].append(score)
    step_version = dict(
        conn.execute("SELECT trajectory_id, MAX(policy_version) FROM steps GROUP BY trajectory_id")
    )
    out = RunSeries()
    newest = 0
    for tid, status, outcome, v0, n_steps, started, finished in conn.execute(
        "SELECT trajectory_id, status, outcome, policy_version_at_start, n_steps, started_at, "
        "finished_at FROM trajectories ORDER BY finished_at, trajectory_id"
    ):
        out.start = started if out.start is None else min(out.start, started)
        out.step_times.append((started, finished, n_steps))
        newest = max(newest, v0, step_version.get(tid) or 0)
        if status in ("aborted", "setup_failed") or outcome is None:
            continue
        out.outcomes.append(outcome)
        by_step = votes.get(tid, {})
        if n_steps:
            total = sum(
                step_rewards(
                    outcome,
                    [by_step.get(i, []) for i in range(n_steps)],
                    reward.policy_lam,
                    reward.outcome_weight,
                )
            )
            out.mean_rewards.append(total / n_steps)
        else:
            out.mean_rewards.append(None)
        all_votes = [s for step in by_step.values() for s in step]
        out.agreement.append(
            sum(s == outcome for s in all_votes) / len(all_votes) if all_votes else None
        )
        out.lag.append(newest - v0)
    out.max_version = newest
    out.stale_dropped = sum(
        v for (v,) in conn.execute("SELECT value FROM counters WHERE name LIKE '%stale_dropped'")
    )
    return out


def series_figure(
    values: Sequence[float | None],
    title: str,
    ylabel: str,
    *,
    ylim: tuple[float, float] | None = None,
    cumulative_when_short: bool = False,
) -> Figure | None:
    """Per-trajectory points (where defined) and their trailing mean; None when no
    value is defined.

    The legend names the window. With a window of 1 the "mean" would be the points
    themselves, so no line is drawn, or, with `cumulative_when_short`, the mean of
    all points so far is drawn and labelled as such (a success rate needs a rate)."""
    pairs = [(i + 1, v) for i, v in enumerate(values) if v is not None]
    if not pairs:
        return None
    x = np.array([p[0] for p in pairs])
    y = np.array([p[1] for p in pairs], dtype=float)
    window = default_window(len(y))
    fig, ax = new_figure()
    shown, half = jitter(y)
    label = "per trajectory" + (f" (jittered ±{half:.2g} to show overlaps)" if half else "")
    ax.scatter(
        x, shown, color=BASE_COLOR, linewidths=0, label=label, zorder=2, **point_style(len(y))
    )
    if window > 1:
        ax.plot(
            x,
            rolling_mean(y, window),
            color=HIGHLIGHT_COLOR,
            linewidth=2.0,
            zorder=3,
            label=f"mean of the last {window} trajectories",
        )
    elif cumulative_when_short and len(y) > 1:
        ax.plot(
            x,
            np.cumsum(y) / np.arange(1, len(y) + 1),
            color=HIGHLIGHT_COLOR,
            linewidth=2.0,
            zorder=3,
            label="mean of all trajectories so far",
        )
    ax.set_xlabel(X_LABEL)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    # Ticks only where values can be: never in a jitter margin (a success of 1.1
    # or a lag of -0.1 does not exist).
    if ylim is not None:
        ax.set_ylim(*ylim)
        ticks = [t for t in ax.get_yticks() if ylim[0] <= t <= ylim[1]]
        ax.set_ylim(ylim[0] - half, ylim[1] + half)
        ax.set_yticks(ticks)
    elif half and len(levels := np.unique(y)) <= 6:
        ax.set_yticks(levels)
    # Under the axes, so it never hides points or the line.
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, fontsize=8, frameon=False)
    return fig


def _line(
    name: str,
    values: Sequence[float | None],
    title: str,
    ylabel: str,
    out_dir: Path,
    result: CurvesResult,
    **style: Any,
) -> None:
    fig = series_figure(values, title, ylabel, **style)
    if fig is None:
        result.skipped[name] = "no data recorded"
    else:
        result.written[name] = save_figure(fig, out_dir / f"{name}.png")


def _throughput(series: RunSeries, out_dir: Path, result: CurvesResult) -> None:
    times = [row for row in series.step_times if row[2] > 0]
    if not times or series.start is None:
        result.skipped["throughput"] = "no steps recorded"
        return
    span = max(f for _, f, _ in times) - series.start
    if span <= 0:
        result.skipped["throughput"] = "all steps share one timestamp"
        return
    # About 30 bins over the run, at least 5 s each: readable for a 2-minute smoke
    # run and a 2-day training run alike. Rates are reported per minute either way.
    width = max(5.0, span / 30)
    edges = np.arange(series.start, series.start + span + width, width)
    steps = spread_steps(times, edges)
    fig, ax = new_figure()
    ax.plot(
        (edges[:-1] + width / 2 - series.start) / 60,
        steps * 60.0 / width,
        color=BASE_COLOR,
        linewidth=1.8,
        marker="o",
        markersize=3,
    )
    ax.set_xlabel("minutes since the first rollout started")
    ax.set_ylabel("steps per minute")
    ax.set_title(f"Throughput ({sum(n for _, _, n in times)} steps, bins of {width:.0f} s)")
    ax.set_ylim(bottom=0)
    result.written["throughput"] = save_figure(fig, out_dir / "throughput.png")


def write_curves(run_dir: str | Path, out_dir: str | Path) -> CurvesResult:
    """Draw every curve the run has data for into `out_dir` (one PNG each)."""
    out_dir = Path(out_dir)
    conn = open_readonly(run_dir)
    try:
        series = load_series(conn)
    finally:
        conn.close()
    result = CurvesResult()
    if series.outcomes:
        _line(
            "success_rate",
            [1.0 if o > 0 else 0.0 for o in series.outcomes],
            f"Success rate ({len(series.outcomes)} scored trajectories)",
            "success (1 = success, 0 = failure)",
            out_dir,
            result,
            ylim=(-0.02, 1.02),
            cumulative_when_short=True,
        )
    else:
        result.skipped["success_rate"] = "no scored (non-aborted) trajectories"
    _line(
        "step_reward",
        series.mean_rewards,
        "Mean step reward R = O + λ·mean S",
        "mean step reward R per step (unitless)",
        out_dir,
        result,
    )
    if "step_reward" in result.skipped:
        result.skipped["step_reward"] = "no steps in scored trajectories"
    _line(
        "prm_agreement",
        series.agreement,
        "PRM agreement with outcomes",
        "agreeing votes (fraction of the trajectory's votes)",
        out_dir,
        result,
        ylim=(-0.02, 1.02),
    )
    if "prm_agreement" in result.skipped:
        result.skipped["prm_agreement"] = "no PRM votes recorded"
    if series.max_version == 0:
        result.skipped["staleness"] = "no policy version change recorded (all versions are 0)"
    else:
        dropped = (
            f", {series.stale_dropped:.0f} stale samples dropped" if series.stale_dropped else ""
        )
        _line(
            "staleness",
            series.lag,
            f"Policy version lag at finish{dropped}",
            "lag (policy versions: newest − at start)",
            out_dir,
            result,
        )
    _throughput(series, out_dir, result)
    return result
