"""The soak's arithmetic: windows of time, throughput per window, growth per process.

Pure functions of the samples (`soak.sampler`), the trajectory rows of the run
store and the faults injected, so they are tested without a run.

Definitions (docs/soak.md):
- windows: consecutive spans of `window_s` from the run's start; the last one may
  be shorter (the run was stopped inside it) and is kept when it is at least half
  a window long, else merged into the one before;
- finished steps per minute of a window: the steps of the good trajectories
  (finished or step limit, not aborted or set-up failed) whose `finished_at` falls
  in it, over its length;
- `throughput_last_over_first`: median of the last two windows' finished steps per
  minute over the median of windows 2 and 3 (the first holds the start-up); None
  with fewer than 4 windows, where the two would overlap or hold the start-up;
- growth of a process between the reference window (the second, or the first when
  there are fewer than 3) and the last: the median of its samples in each, for
  processes alive in both (the same pid: a restarted replica is a new process);
  the rates per hour divide by the time between the two windows' middles. Open
  fds and threads also come as each window's floor (its smallest sample): requests
  in flight to a replica that is coming back, or a transfer waiting out its timeout,
  raise the median for minutes and then drain, while a leak raises the floor too.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable
from typing import Any

from cua_rl.store.run_summary import reason_key

GOOD_STATUSES_EXCLUDED = ("aborted", "setup_failed")


def window_bounds(duration_s: float, window_s: float) -> list[tuple[float, float]]:
    """[start, end) of each window over [0, duration_s] (see the module docstring)."""
    if duration_s <= 0 or window_s <= 0:
        return []
    bounds, start = [], 0.0
    while start + window_s <= duration_s + 1e-9:
        bounds.append((start, start + window_s))
        start += window_s
    rest = duration_s - start
    if rest > 1e-9:
        if rest >= window_s / 2 or not bounds:
            bounds.append((start, duration_s))
        else:
            bounds[-1] = (bounds[-1][0], duration_s)
    return bounds


def _index(bounds: list[tuple[float, float]], t: float) -> int | None:
    for i, (start, end) in enumerate(bounds):
        if start <= t < end or (i == len(bounds) - 1 and t == end):
            return i
    return None


def throughput(
    records: Iterable[dict[str, Any]], t0: float, bounds: list[tuple[float, float]]
) -> list[dict[str, Any]]:
    """Per window: finished steps and episodes, steps per minute, episodes aborted
    and why (reasons masked as `runs show` groups them). `records`: the store's
    `trajectory_records()`; `t0`: the run's start (epoch seconds)."""
    out = [
        {
            "index": i,
            "start_s": round(s, 1),
            "end_s": round(e, 1),
            "finished_steps": 0,
            "episodes": 0,
            "aborted": 0,
            "abort_reasons": Counter(),
        }
        for i, (s, e) in enumerate(bounds)
    ]
    for record in records:
        i = _index(bounds, float(record["finished_at"]) - t0)
        if i is None:
            continue
        if record["status"] in GOOD_STATUSES_EXCLUDED:
            out[i]["aborted"] += 1
            out[i]["abort_reasons"][reason_key(record.get("error") or "")] += 1
        else:
            out[i]["episodes"] += 1
            out[i]["finished_steps"] += int(record["n_steps"])
    for w in out:
        minutes = max((w["end_s"] - w["start_s"]) / 60.0, 1e-9)
        w["finished_steps_per_min"] = round(w["finished_steps"] / minutes, 2)
        w["abort_reasons"] = dict(w["abort_reasons"].most_common())
    return out


def ratio_last_over_first(per_min: list[float]) -> float | None:
    """Median of the last two windows over the median of windows 2-3 (module doc)."""
    if len(per_min) < 4:
        return None
    first = statistics.median(per_min[1:3])
    last = statistics.median(per_min[-2:])
    return None if first <= 0 else round(last / first, 3)


def reference_window(n: int) -> int:
    """The window growth is measured from: the second, or the first below 3 windows."""
    return 1 if n >= 3 else 0


def process_key(proc: dict[str, Any]) -> tuple[int, float]:
    """A process's identity across samples: its pid and start time (a pid reused by
    another process later is another process)."""
    return int(proc["pid"]), float(proc.get("started", 0.0))


def latest_names(samples: list[dict[str, Any]]) -> dict[tuple[int, float], str]:
    """Each process's newest name (a replica is named by its pool once its log
    names its port)."""
    return {process_key(p): p["name"] for s in samples for p in s["processes"]}


def _medians(
    samples: list[dict[str, Any]], bound: tuple[float, float]
) -> dict[tuple[int, float], dict[str, float]]:
    """process -> median rss_mb, fds, threads of its samples inside `bound`, and the
    floors (smallest samples) of fds and threads."""
    values: dict[tuple[int, float], dict[str, list[float]]] = {}
    for sample in samples:
        if not bound[0] <= sample["t"] <= bound[1]:
            continue
        for proc in sample["processes"]:
            entry = values.setdefault(process_key(proc), {"rss_mb": [], "fds": [], "threads": []})
            for key in entry:
                entry[key].append(float(proc[key]))
    return {
        key: {
            **{k: statistics.median(v) for k, v in entry.items()},
            "fds_floor": min(entry["fds"]),
            "threads_floor": min(entry["threads"]),
        }
        for key, entry in values.items()
    }


def _hours_between(bounds: list[tuple[float, float]], a: int, b: int) -> float:
    mid = [(s + e) / 2 for s, e in bounds]
    return (mid[b] - mid[a]) / 3600.0


def process_growth(
    samples: list[dict[str, Any]], bounds: list[tuple[float, float]]
) -> dict[str, dict[str, float]]:
    """Per long-lived process (sampled in the reference and the last window): its
    medians in both, growth in MB and %, and rates per hour (module docstring)."""
    if len(bounds) < 2:
        return {}
    ref, last = reference_window(len(bounds)), len(bounds) - 1
    before, after = _medians(samples, bounds[ref]), _medians(samples, bounds[last])
    hours = max(_hours_between(bounds, ref, last), 1e-9)
    names = latest_names(samples)
    out = {}
    for key in sorted(before.keys() & after.keys(), key=lambda k: names[k]):
        a, b = before[key], after[key]
        out[names[key]] = {
            "rss_mb_first": round(a["rss_mb"], 1),
            "rss_mb_last": round(b["rss_mb"], 1),
            "rss_growth_mb": round(b["rss_mb"] - a["rss_mb"], 1),
            "rss_growth_pct": round(100 * (b["rss_mb"] - a["rss_mb"]) / max(a["rss_mb"], 1e-9), 1),
            "rss_mb_per_h": round((b["rss_mb"] - a["rss_mb"]) / hours, 1),
            "fds_first": a["fds"],
            "fds_last": b["fds"],
            "fds_per_h": round((b["fds"] - a["fds"]) / hours, 1),
            "threads_first": a["threads"],
            "threads_last": b["threads"],
            "threads_per_h": round((b["threads"] - a["threads"]) / hours, 1),
            "fds_floor_first": a["fds_floor"],
            "fds_floor_last": b["fds_floor"],
            "threads_floor_first": a["threads_floor"],
            "threads_floor_last": b["threads_floor"],
        }
    return out


def dir_growth(
    samples: list[dict[str, Any]], bounds: list[tuple[float, float]]
) -> dict[str, float]:
    """Run-directory MB per hour by part, between the reference and the last window
    (median of each part's size in each)."""
    if len(bounds) < 2:
        return {}
    ref, last = reference_window(len(bounds)), len(bounds) - 1
    hours = max(_hours_between(bounds, ref, last), 1e-9)

    def medians(bound: tuple[float, float]) -> dict[str, float]:
        inside = [s["run_dir_mb"] for s in samples if bound[0] <= s["t"] <= bound[1]]
        return {k: statistics.median(d[k] for d in inside) for k in inside[0]} if inside else {}

    a, b = medians(bounds[ref]), medians(bounds[last])
    return {k: round((b[k] - a[k]) / hours, 2) for k in sorted(a.keys() & b.keys())}


def window_resources(
    samples: list[dict[str, Any]], bounds: list[tuple[float, float]]
) -> list[dict[str, Any]]:
    """Per window: the run's processes' summed RSS, fds and threads and the run
    directory's size (medians of the window's samples), and how many processes."""
    out = []
    for bound in bounds:
        inside = [s for s in samples if bound[0] <= s["t"] <= bound[1]]

        def med(values: list[float]) -> float | None:
            return round(statistics.median(values), 1) if values else None

        out.append(
            {
                "rss_mb": med([sum(p["rss_mb"] for p in s["processes"]) for s in inside]),
                "fds": med([sum(p["fds"] for p in s["processes"]) for s in inside]),
                "threads": med([sum(p["threads"] for p in s["processes"]) for s in inside]),
                "processes": med([len(s["processes"]) for s in inside]),
                "run_dir_mb": med([s["run_dir_mb"]["total"] for s in inside]),
                "process_kinds": _kinds(inside),
            }
        )
    return out


def _kinds(samples: list[dict[str, Any]]) -> dict[str, float]:
    """Median number of live processes of each kind (the name without its pid):
    desktops restart their processes at every reset, so a leak of them shows as a
    kind's count growing, not as one process growing."""
    counts = [Counter(p["name"].rsplit("#", 1)[0] for p in s["processes"]) for s in samples]
    kinds = sorted({k for c in counts for k in c})
    return {k: float(statistics.median(c.get(k, 0) for c in counts)) for k in kinds}


def faults_per_window(
    faults: list[dict[str, Any]], bounds: list[tuple[float, float]]
) -> list[dict[str, int]]:
    """Per window: faults injected in it and, of those, recovered."""
    out = [{"faults_injected": 0, "faults_recovered": 0} for _ in bounds]
    for fault in faults:
        i = _index(bounds, fault["t"])
        if i is not None:
            out[i]["faults_injected"] += 1
            out[i]["faults_recovered"] += bool(fault.get("recovered"))
    return out
