"""The loop profile's arithmetic on hand-built spans: unions of intervals, busy
fractions, waits, lag, the episode breakdown, the windows a sync-mode check uses,
and the latency model fitted from spans."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from tests_support.span_windows import episode_windows, intersection_s, overlapping

from cua_rl.report.loop_profile import (
    Window,
    latency_model,
    load_spans,
    merged,
    profile,
    sync_windows,
    union_s,
    update_windows,
)
from cua_rl.rollout.latency import LatencyModel


def s(kind: str, start: float, end: float, **attrs: Any) -> dict[str, Any]:
    return {"kind": kind, "start": start, "end": end, "pid": attrs.pop("pid", 1), **attrs}


def test_union_and_intersection_of_intervals() -> None:
    intervals = [(0, 2), (1, 3), (5, 6), (6, 7), (8, 8), (10, 9)]  # empty ones ignored
    assert merged(intervals) == [(0, 3), (5, 7)]
    assert union_s(intervals) == 5
    assert union_s(intervals, lo=2, hi=5.5) == 1.5
    assert intersection_s([(0, 3), (5, 7)], [(2, 6)]) == 2
    assert intersection_s([(0, 1)], [(1, 2)]) == 0
    a, b, c = Window(0, 2, "a"), Window(2, 3, "b"), Window(1, 2.5, "c")
    assert overlapping([a, b], [c]) == [(a, c), (b, c)]
    assert overlapping([a], [b]) == []  # touching ends do not overlap


def _run() -> list[dict[str, Any]]:
    """Two actors on two desktops over [0, 10]; one policy replica of two, one PRM
    replica; a policy learner with one update."""
    ep1 = [
        s("episode", 0, 6, actor=0, tid="a", steps=2),
        s("setup", 0, 1, tid="a"),
        s("prompt", 1, 1.1, tid="a"),
        s("policy_call", 1.1, 2.6, tid="a", step=0),
        s("replica_wait", 1.1, 1.6, tid="a"),
        s("act", 2.6, 3, tid="a"),
        s("screenshot", 3, 3.4, tid="a"),
        s("images", 3.4, 3.5, tid="a"),
        s("policy_call", 3.5, 4.5, tid="a", step=1),
        s("evaluate", 4.5, 5.8, tid="a"),
        s("save", 5.8, 5.9, tid="a"),
    ]  # 0.1 s unaccounted
    ep2 = [
        s("episode", 2, 8, actor=1, tid="b", steps=3),
        s("setup", 2, 8, tid="b"),
        s("episode", 9, 9.5, actor=1, tid="c", error="EpisodeAborted"),
    ]
    return [
        s("fleet", 0, 0, actors=2),
        s("pool", 0, 0, name="policy", replicas=2),
        s("pool", 0, 0, name="prm", replicas=1, pid=2),
        *ep1,
        *ep2,
        s("replica_call", 1.6, 2.6, pool="policy", replica="p0"),
        s("replica_call", 2.0, 3.0, pool="policy", replica="p0"),  # overlaps: union 1.4
        s("replica_call", 3.5, 4.5, pool="policy", replica="p0"),
        s("replica_call", 3, 5, pool="prm", replica="q0"),
        s("prm_call", 3, 5, tid="a"),
        s("ticket_wait", 8, 10, actor=1),
        s("gate_wait", 6, 7, actor=0),
        s("lease_wait", 7, 7.5, actor=0),
        s("judge_wait", 6, 6.5, tid="a"),
        s(
            "learner_step",
            6,
            8,
            role="policy",
            version=1,
            groups=2,
            samples=10,
            used=8,
            lag_mean=0.5,
            lag_max=1,
        ),
        s("checkpoint", 8, 8.5, role="policy", version=1),
        s("weight_sync", 8.5, 9, role="policy", version=1),
    ]


def test_profile_of_a_hand_built_run() -> None:
    p = profile(_run())
    assert p["window"] == {"start": 0, "end": 10, "wall_s": 10}
    assert (p["episodes"], p["episodes_aborted"], p["steps"]) == (2, 1, 5)
    assert p["episodes_per_min"] == pytest.approx(12) and p["steps_per_min"] == pytest.approx(30)
    assert p["desktops"] == 2 and p["desktop_busy"] == pytest.approx((6 + 6 + 0.5) / 20)
    assert p["pools"]["policy"] == {
        "replicas": 2,
        "busy": pytest.approx(2.4 / 20),
        "calls": 3,
        "call_s_mean": pytest.approx(1.0),
    }
    assert p["pools"]["prm"]["busy"] == pytest.approx(0.2)
    policy = p["learners"]["policy"]
    assert policy["busy"] == pytest.approx(0.3) and policy["step_busy"] == pytest.approx(0.2)
    assert (policy["updates"], policy["weight_sync_s"]) == (1, 0.5)
    assert p["waits_s"] == {
        "ticket_wait": 2,
        "gate_wait": 1,
        "lease_wait": 0.5,
        "replica_wait": 0.5,
        "judge_wait": 0.5,
    }
    assert p["policy_replica_wait_s"] == 0.5
    assert p["lag"]["policy"] == {"samples": 10, "used": 8, "mean": 0.5, "max": 1.0}
    b = p["breakdown"]
    assert b["episode_s"] == 12
    assert b["parts_s"]["policy_call"] == pytest.approx(2.0)  # 2.5 minus the 0.5 wait
    assert b["parts_s"]["replica_wait"] == 0.5 and b["parts_s"]["setup"] == 7
    assert b["unaccounted_s"] == pytest.approx(0.1)
    assert b["sum_error"] == pytest.approx(0.1 / 12)
    assert sum(b["parts_fraction"].values()) == pytest.approx(1 - 0.1 / 12)
    assert b["judge_wait_after_s"] == 0.5


def test_a_window_counts_time_inside_it_and_episodes_that_ended_in_it() -> None:
    p = profile(_run(), window=(5, 10), desktops=4)
    assert p["window"]["wall_s"] == 5 and p["episodes"] == 2 and p["steps"] == 5
    assert p["desktop_busy"] == pytest.approx((1 + 3 + 0.5) / 20)
    assert p["learners"]["policy"]["busy"] == pytest.approx(3 / 5)
    assert p["waits_s"]["gate_wait"] == 1 and p["waits_s"]["ticket_wait"] == 2


def test_sync_and_async_timelines_are_told_apart_by_their_windows() -> None:
    def update(v: int, t: float) -> list[dict[str, Any]]:
        return [
            s("learner_step", t, t + 1, role="policy", version=v),
            s("checkpoint", t + 1, t + 1.2, role="policy", version=v),
            s("weight_sync", t + 1.2, t + 2, role="policy", version=v),
            s("learner_step", t + 1.3, t + 1.6, role="prm", version=v),
        ]

    sync = [
        s("episode", 0, 3, tid="a"),
        s("episode", 0.5, 3.5, tid="b"),
        *update(1, 3.6),
        s("episode", 5.7, 8, tid="c"),
        *update(2, 8.1),
    ]
    assert [w.label for w in sync_windows(sync)] == ["1", "2"]
    assert update_windows(sync) == [Window(3.6, 5.6, "1"), Window(8.1, 10.1, "2")]
    assert overlapping(episode_windows(sync), update_windows(sync)) == []
    # no rollout of batch k+1 starts before batch k's sync ends
    ends = [w.end for w in sync_windows(sync)]
    assert all(
        not (e.start < ends[0] < e.end) and (e.end <= 3.6 or e.start >= ends[0])
        for e in episode_windows(sync)
    )
    asynchronous = [s("episode", 0, 3, tid="a"), *update(1, 2.0), s("episode", 3, 6, tid="b")]
    assert [
        (e.label, u.label)
        for e, u in overlapping(episode_windows(asynchronous), update_windows(asynchronous))
    ] == [("a", "1"), ("b", "1")]
    assert intersection_s(episode_windows(asynchronous), update_windows(asynchronous)) == 2


def test_latency_model_fits_dists_the_simulator_accepts() -> None:
    model = latency_model(_run())
    assert model["reset_s"]["median_s"] == pytest.approx(3.5)  # setups of 1 s and 6 s
    assert model["reset_s"]["sigma"] == pytest.approx(math.log(6) / 2)
    assert (model["reset_s"]["min_s"], model["reset_s"]["max_s"]) == (1, 6)
    assert model["policy_s"]["median_s"] == pytest.approx(1.0)  # replica time, not waits
    assert model["prm_s"]["median_s"] == 2 and model["weight_sync_s"]["median_s"] == 0.5
    assert model["episode_steps"] == {
        "median": 2.5,
        "sigma": pytest.approx(math.log(1.5) / 2),
        "min": 2,
        "max": 3,
    }
    assert model["learner_s_per_group"] == 1.0
    validated = LatencyModel.model_validate(model)
    assert validated.act_s.median_s == pytest.approx(0.4)
    assert LatencyModel.model_validate(latency_model([])) == LatencyModel()  # all defaults


def test_load_spans_reads_every_process_file_and_skips_bad_lines(tmp_path: Path) -> None:
    folder = tmp_path / "spans"
    folder.mkdir()
    (folder / "spans-1.jsonl").write_text(
        json.dumps(s("act", 2, 3))
        + "\n[1, 2]\n"
        + json.dumps({"kind": "x", "start": "a", "end": 1})
        + '\n{"kind": "act", "st'
    )
    (folder / "spans-2.jsonl").write_text(json.dumps(s("setup", 1, 2, pid=2)) + "\n")
    (folder / "other.txt").write_text("not spans")
    assert [(x["kind"], x["pid"]) for x in load_spans(tmp_path)] == [("setup", 2), ("act", 1)]
    assert load_spans(tmp_path / "none") == []
