"""The figures of one `cua-rl bench loop` run (bench/loop.py), read back from what the
run stored: its update events and trajectories (`run_store`) and its spans
(`report/loop_profile.py`).

It is apart from bench/loop.py, which starts the runs, compares the modes and asks the
simulator for its prediction: this module only reads a finished run directory (its
measured window, update windows, busy fractions, requests during weight syncs, task
order and preparation work), so each figure can be checked on a stored run alone.
"""

from __future__ import annotations

import bisect
import statistics
from pathlib import Path
from typing import Any

from cua_rl.errors import RunFailed
from cua_rl.store.run_store import RunStore


def update_windows(run_dir: Path) -> list[dict[str, Any]]:
    """Per policy update: when it started, when both learners had trained (and
    checkpointed) and when both had synced, from the stored update events.

    The reward model's update of the same step starts after the policy's (it follows
    the policy step by step) and before the next policy update; its own version may
    lag the policy's (a step without reward-model samples changes no weights), so the
    two are paired by time, not by version."""
    events = RunStore.read_only(run_dir).events("update")
    policy = sorted(
        (e["data"] for e in events if e["subject"] == "policy"), key=lambda d: d["started_at"]
    )
    out = [
        {
            "version": int(d["version"]),
            "start": d["started_at"],
            "trained": d["trained_at"],
            "end": d.get("synced_at") or d["trained_at"],
        }
        for d in policy
    ]
    starts = [u["start"] for u in out]
    for event in events:
        if event["subject"] == "policy":
            continue
        data = event["data"]
        k = bisect.bisect_right(starts, data["started_at"]) - 1
        if k < 0:
            continue
        out[k]["trained"] = max(out[k]["trained"], data["trained_at"])
        out[k]["end"] = max(out[k]["end"], data.get("synced_at") or data["trained_at"])
    return out


def measured_window(run_dir: Path) -> tuple[float, float]:
    """From the first rollout's start to the end of the last update (both learners
    trained and synced), from the store."""
    records = RunStore.read_only(run_dir).trajectory_records()
    updates = update_windows(run_dir)
    if not records or not updates:
        raise RunFailed(f"{run_dir}: no rollout or no update was stored")
    return min(r["started_at"] for r in records), updates[-1]["end"]


def median_or_zero(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def during_syncs(spans: list[dict[str, Any]]) -> dict[str, float]:
    """Policy requests answered per second while a policy weight sync ran, and
    outside syncs: what staggering the sync is for."""
    from cua_rl.report.loop_profile import merged, sync_windows

    syncs = merged((w.start, w.end) for w in sync_windows(spans, "policy"))
    calls = [
        s["end"]
        for s in spans
        if s["kind"] == "replica_call" and s.get("pool") == "policy" and "error" not in s
    ]
    if not syncs or not calls:
        return {"policy_calls_per_s_in_sync": 0.0, "policy_calls_per_s_outside": 0.0, "sync_s": 0.0}
    lo, hi = min(calls), max(calls)
    inside = sum(1 for t in calls if any(a <= t <= b for a, b in syncs))
    sync_s = sum(b - a for a, b in syncs)
    rest = max(1e-9, hi - lo - sync_s)
    return {
        "policy_calls_per_s_in_sync": inside / max(1e-9, sync_s),
        "policy_calls_per_s_outside": (len(calls) - inside) / rest,
        "sync_s": sync_s,
    }


def mode_figures(run_dir: Path, desktops: int) -> dict[str, Any]:
    """One run's figures over its measured window (`report/loop_profile.py`)."""
    from cua_rl.report.loop_profile import load_spans, profile

    spans = load_spans(run_dir)
    figures = profile(spans, desktops=desktops, window=measured_window(run_dir))
    counters = RunStore.read_only(run_dir).counters()
    updates = update_windows(run_dir)
    figures["samples_used"] = {
        role: counters.get(f"{role}_samples_used", 0) for role in ("policy", "prm")
    }
    figures["update_s_median"] = median_or_zero([u["trained"] - u["start"] for u in updates])
    figures["sync_s_median"] = median_or_zero([u["end"] - u["trained"] for u in updates])
    figures["during_syncs"] = during_syncs(spans)
    figures["setup_wait_share"] = figures["breakdown"]["parts_fraction"]["setup"]
    figures["task_order"] = task_order(run_dir)
    figures["preparation"] = preparation(spans)
    return figures


def task_order(run_dir: Path) -> list[str]:
    """The variant of each group in the order the groups opened (their first rollout's
    start): what Algorithm 2 handed out, compared across modes with the same seed."""
    first: dict[str, tuple[float, str]] = {}
    for r in RunStore.read_only(run_dir).trajectory_records():
        group, start = r["group_id"], r["started_at"]
        if group not in first or start < first[group][0]:
            first[group] = (start, r["variant_id"])
    return [variant for _, variant in sorted(first.values())]


def preparation(spans: list[dict[str, Any]]) -> dict[str, Any]:
    """Work done for the episodes off their actors' path: spare setups, fork saves and
    restores (count and median seconds each)."""
    out: dict[str, Any] = {}
    for kind in ("spare_setup", "fork_save", "fork_restore"):
        took = [s["end"] - s["start"] for s in spans if s["kind"] == kind and "error" not in s]
        out[kind] = {"count": len(took), "median_s": median_or_zero(took)}
    return out
