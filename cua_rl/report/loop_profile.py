"""Where a run's time went, from the spans it recorded (`metrics.spans`, `cua_rl/spans.py`).

`profile` turns the spans of every process of a run into the figures that compare
an asynchronous and a synchronous training loop: throughput, how busy desktops,
model pools and learners were, how long actors waited and for what, how old the
trained samples were, and a breakdown of an episode's wall time by what it spent
it on. `latency_model` fits the simulator's `LatencyModel` (bench fleet
--simulated) to the same spans, so a simulation can replay a measured run.

Why intervals and unions: busy fractions count a resource busy while at least one
of its intervals is open (a replica running 8 requests at once is busy, not 8x
busy), so they are the length of the union of its intervals over the window,
divided by (resources x window).
"""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from cua_rl.spans import SPANS_DIR

Span = dict[str, Any]

EPISODE_PARTS = (
    "setup",
    "prompt",
    "policy_call",
    "act",
    "screenshot",
    "images",
    "evaluate",
    "recording",
    "save",
)
"""Spans an episode is made of (tid attr; `cua_rl/rollout/actor.py`). `replica_wait`
spans of the episode's policy calls lie inside `policy_call` and are split out."""
ACTOR_WAITS = ("ticket_wait", "gate_wait", "lease_wait", "replica_wait", "judge_wait")
LEARNER_KINDS = ("learner_step", "checkpoint", "weight_sync")


class Window(NamedTuple):
    start: float
    end: float
    label: str = ""

    @property
    def seconds(self) -> float:
        return self.end - self.start


def load_spans(run_dir: Path) -> list[Span]:
    """Every well-formed span of every process of a run, by start time; a torn line
    (a process killed mid-write) is skipped."""
    spans: list[Span] = []
    for path in sorted((Path(run_dir) / SPANS_DIR).glob("spans-*.jsonl")):
        with path.open(encoding="utf-8") as lines:
            for line in lines:
                try:
                    span = json.loads(line)
                except ValueError:
                    continue
                if (
                    isinstance(span, dict)
                    and isinstance(span.get("kind"), str)
                    and isinstance(span.get("start"), int | float)
                    and isinstance(span.get("end"), int | float)
                ):
                    spans.append(span)
    spans.sort(key=lambda s: s["start"])
    return spans


def merged(intervals: Iterable[Sequence[float]]) -> list[tuple[float, float]]:
    """The union of intervals ((start, end, ...) pairs or `Window`s) as disjoint,
    sorted intervals."""
    out: list[tuple[float, float]] = []
    for start, end in sorted((iv[0], iv[1]) for iv in intervals if iv[1] > iv[0]):
        if out and start <= out[-1][1]:
            if end > out[-1][1]:
                out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


def union_s(
    intervals: Iterable[Sequence[float]], lo: float = -math.inf, hi: float = math.inf
) -> float:
    """Length of the union of intervals, clipped to [lo, hi]."""
    return sum(max(0.0, min(e, hi) - max(s, lo)) for s, e in merged(intervals))


def _of(spans: Iterable[Span], *kinds: str) -> list[Span]:
    return [s for s in spans if s["kind"] in kinds]


def sync_windows(spans: Iterable[Span], role: str = "policy") -> list[Window]:
    """Each weight sync of `role`'s learner, labelled with the version it pushed."""
    return [
        Window(s["start"], s["end"], str(s.get("version", "")))
        for s in _of(spans, "weight_sync")
        if s.get("role") == role
    ]


def update_windows(spans: Iterable[Span], role: str = "policy") -> list[Window]:
    """Each update of `role`'s learner from its training step's start to the end of
    its checkpoint and weight sync (the spans of update v all carry version v): what
    a synchronous loop keeps rollouts out of."""
    bounds: dict[Any, list[float]] = {}
    for s in _of(spans, *LEARNER_KINDS):
        if s.get("role") == role:
            b = bounds.setdefault(s.get("version"), [s["start"], s["end"]])
            b[0], b[1] = min(b[0], s["start"]), max(b[1], s["end"])
    return sorted(Window(lo, hi, str(v)) for v, (lo, hi) in bounds.items())


def _window(spans: list[Span]) -> tuple[float, float]:
    timed = [s for s in spans if s["end"] > s["start"]]
    if not timed:
        return 0.0, 0.0
    return min(s["start"] for s in timed), max(s["end"] for s in timed)


def _latest_per_pid(markers: list[Span], key: str) -> dict[Any, int]:
    out: dict[Any, int] = {}
    for m in markers:
        out[(m.get("pid"), m.get("name"))] = int(m.get(key, 0))
    return out


def _desktops(spans: list[Span], episodes: list[Span]) -> int:
    fleets = _latest_per_pid(_of(spans, "fleet"), "actors")
    if fleets:
        return sum(fleets.values())
    return len({(s.get("pid"), s.get("actor")) for s in episodes})


def _pool_sizes(spans: list[Span]) -> dict[str, int]:
    """Replicas per pool: the largest count any process's `pool` marker gave (fleet
    workers each route over the same replicas), else the replicas seen in calls."""
    sizes: dict[str, int] = {}
    for m in _of(spans, "pool"):
        sizes[m["name"]] = max(sizes.get(m["name"], 0), int(m.get("replicas", 0)))
    for s in _of(spans, "replica_call"):
        sizes.setdefault(s["pool"], 0)
    for name, size in sizes.items():
        if not size:
            sizes[name] = len(
                {s["replica"] for s in _of(spans, "replica_call") if s["pool"] == name}
            )
    return sizes


def _fraction(num: float, den: float) -> float:
    return num / den if den > 0 else 0.0


def profile(
    spans: list[Span],
    *,
    desktops: int | None = None,
    pools: dict[str, int] | None = None,
    window: tuple[float, float] | None = None,
) -> dict[str, Any]:
    """The figures of one run (or of `window`, e.g. after a warm-up): see module doc.

    `desktops`: desktops of the run (default: the actors of its `fleet` markers);
    `pools`: replicas per pool name (default: from the `pool` markers). Episodes,
    steps and the breakdown count episodes that ended inside the window; busy
    fractions and waits count time inside it."""
    lo, hi = window or _window(spans)
    wall = max(0.0, hi - lo)
    minutes = wall / 60.0
    episodes = [s for s in _of(spans, "episode") if lo <= s["end"] <= hi]
    finished = [s for s in episodes if "error" not in s]
    steps = sum(int(s.get("steps", 0)) for s in finished)
    n_desktops = desktops or _desktops(spans, episodes)
    per_actor: dict[Any, list[tuple[float, float]]] = defaultdict(list)
    for s in _of(spans, "episode"):
        per_actor[(s.get("pid"), s.get("actor"))].append((s["start"], s["end"]))
    desktop_s = sum(union_s(iv, lo, hi) for iv in per_actor.values())
    return {
        "window": {"start": lo, "end": hi, "wall_s": wall},
        "episodes": len(finished),
        "episodes_aborted": len(episodes) - len(finished),
        "steps": steps,
        "episodes_per_min": _fraction(len(finished), minutes),
        "steps_per_min": _fraction(steps, minutes),
        "desktops": n_desktops,
        "desktop_busy": _fraction(desktop_s, n_desktops * wall),
        "pools": _pools(spans, pools, lo, hi),
        "learners": _learners(spans, lo, hi),
        "waits_s": {
            kind: sum(max(0.0, min(s["end"], hi) - max(s["start"], lo)) for s in _of(spans, kind))
            for kind in ACTOR_WAITS
        },
        "policy_replica_wait_s": sum(
            max(0.0, min(s["end"], hi) - max(s["start"], lo))
            for s in _of(spans, "replica_wait")
            if s.get("tid") is not None
        ),
        "lag": _lag(spans, lo, hi),
        "breakdown": breakdown(spans, finished),
    }


def _pools(
    spans: list[Span], sizes: dict[str, int] | None, lo: float, hi: float
) -> dict[str, dict[str, float]]:
    sizes = {**_pool_sizes(spans), **(sizes or {})}
    calls: dict[str, dict[str, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    for s in _of(spans, "replica_call"):
        calls[s["pool"]][s["replica"]].append((s["start"], s["end"]))
    out = {}
    for name, replicas in sizes.items():
        busy = sum(union_s(iv, lo, hi) for iv in calls[name].values())
        durations = [e - s for iv in calls[name].values() for s, e in iv if lo <= e <= hi]
        out[name] = {
            "replicas": replicas,
            "busy": _fraction(busy, replicas * (hi - lo)),
            "calls": len(durations),
            "call_s_mean": statistics.fmean(durations) if durations else 0.0,
        }
    return out


def _learners(spans: list[Span], lo: float, hi: float) -> dict[str, dict[str, float]]:
    """Per role: `busy` counts training steps, checkpoints and weight syncs,
    `step_busy` training steps only."""
    out: dict[str, dict[str, float]] = {}
    roles = sorted({s.get("role", "") for s in _of(spans, *LEARNER_KINDS)})
    for role in roles:
        mine = [s for s in _of(spans, *LEARNER_KINDS) if s.get("role") == role]
        intervals = {
            k: [(s["start"], s["end"]) for s in mine if s["kind"] == k] for k in LEARNER_KINDS
        }
        wall = hi - lo
        out[role] = {
            "busy": _fraction(
                union_s([iv for k in LEARNER_KINDS for iv in intervals[k]], lo, hi), wall
            ),
            "step_busy": _fraction(union_s(intervals["learner_step"], lo, hi), wall),
            "updates": sum(1 for s in mine if s["kind"] == "learner_step" and lo <= s["end"] <= hi),
            **{f"{k}_s": union_s(intervals[k], lo, hi) for k in LEARNER_KINDS},
        }
    return out


def _lag(spans: list[Span], lo: float, hi: float) -> dict[str, dict[str, float]]:
    """Per role: policy lag of trained samples (learner version before the update
    minus the sample's behaviour version), sample-weighted mean and max."""
    out: dict[str, dict[str, float]] = {}
    for s in _of(spans, "learner_step"):
        if not lo <= s["end"] <= hi:
            continue
        role = out.setdefault(
            s.get("role", ""), {"samples": 0, "used": 0, "mean": 0.0, "max": 0.0, "_sum": 0.0}
        )
        n = int(s.get("samples", 0))
        role["samples"] += n
        role["used"] += int(s.get("used", n))
        role["_sum"] += float(s.get("lag_mean", 0.0)) * n
        role["max"] = max(role["max"], float(s.get("lag_max", 0.0)))
    for role in out.values():
        role["mean"] = _fraction(role.pop("_sum"), role["samples"])
    return out


def breakdown(spans: list[Span], episodes: list[Span]) -> dict[str, Any]:
    """Where the episodes' wall time went: seconds and share per part, the policy
    calls' waits for a replica split out, the rest unaccounted. `sum_error` is
    |sum of parts - episode time| / episode time."""
    tids = {s.get("tid") for s in episodes}
    total = sum(s["end"] - s["start"] for s in episodes)
    parts = dict.fromkeys((*EPISODE_PARTS, "replica_wait"), 0.0)
    after = 0.0
    for s in spans:
        if s.get("tid") not in tids:
            continue
        if s["kind"] in parts:
            parts[s["kind"]] += s["end"] - s["start"]
        elif s["kind"] == "judge_wait":
            after += s["end"] - s["start"]
    parts["policy_call"] -= parts["replica_wait"]  # waits recorded inside the calls
    accounted = sum(parts.values())
    return {
        "episode_s": total,
        "parts_s": parts,
        "parts_fraction": {k: _fraction(v, total) for k, v in parts.items()},
        "unaccounted_s": total - accounted,
        "sum_error": _fraction(abs(total - accounted), total),
        "judge_wait_after_s": after,
    }


def _fit(durations: Sequence[float]) -> dict[str, float] | None:
    """A `Dist`: median, spread of the logs (capped at the model's 3.0), observed range."""
    values = sorted(max(d, 1e-6) for d in durations)
    if not values:
        return None
    logs = [math.log(v) for v in values]
    sigma = statistics.pstdev(logs) if len(logs) > 1 else 0.0
    return {
        "median_s": statistics.median(values),
        "sigma": min(3.0, sigma),
        "min_s": values[0],
        "max_s": values[-1],
    }


def latency_model(spans: list[Span]) -> dict[str, Any]:
    """A `LatencyModel`-shaped dict measured from `spans` (validate it with
    `LatencyModel.model_validate`); what was not measured keeps the model's default.

    Model calls are replica service times (`replica_call`, the queue for a slot left
    out: the simulator queues by its own capacity), else the callers' spans. The
    learner's time per group is measured on this run's learner, not per 8-GPU node."""

    def durations(kind: str, **match: Any) -> list[float]:
        return [
            s["end"] - s["start"]
            for s in _of(spans, kind)
            if "error" not in s and all(s.get(k) == v for k, v in match.items())
        ]

    model: dict[str, Any] = {}
    fits = {
        "reset_s": durations("setup"),
        "act_s": durations("act"),
        "screenshot_s": durations("screenshot"),
        "evaluate_s": durations("evaluate"),
        "policy_s": durations("replica_call", pool="policy") or durations("policy_call"),
        "prm_s": durations("replica_call", pool="prm") or durations("prm_call"),
        "weight_sync_s": durations("weight_sync", role="policy"),
    }
    for key, values in fits.items():
        if (dist := _fit(values)) is not None:
            model[key] = dist
    steps = [
        int(s["steps"])
        for s in _of(spans, "episode")
        if "error" not in s and int(s.get("steps", 0)) > 0
    ]
    if steps:
        fit = _fit(steps)
        assert fit is not None
        model["episode_steps"] = {
            "median": fit["median_s"],
            "sigma": fit["sigma"],
            "min": min(steps),
            "max": max(steps),
        }
    per_group = [
        (s["end"] - s["start"]) / int(s["groups"])
        for s in _of(spans, "learner_step")
        if s.get("role") == "policy" and int(s.get("groups", 0)) > 0
    ]
    if per_group:
        model["learner_s_per_group"] = max(1e-6, statistics.median(per_group))
    return model
