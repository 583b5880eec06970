"""`bench soak`'s arithmetic on hand-made samples and trajectory rows: windows,
throughput per window and its last/first ratio, growth per process and of the run
directory, faults per window."""

from __future__ import annotations

from typing import Any

import pytest

from cua_rl.bench.soak.windows import (
    dir_growth,
    faults_per_window,
    process_growth,
    ratio_last_over_first,
    throughput,
    window_bounds,
    window_resources,
)

T0 = 1_000_000.0


def test_windows_cover_the_run_and_a_short_tail_joins_the_last() -> None:
    assert window_bounds(600, 300) == [(0, 300), (300, 600)]
    assert window_bounds(650, 300) == [(0, 300), (300, 650)]  # 50 s tail: merged
    assert window_bounds(800, 300) == [(0, 300), (300, 600), (600, 800)]  # 200 s: kept
    assert window_bounds(100, 300) == [(0, 100)]
    assert window_bounds(0, 300) == []


def _traj(t: float, n_steps: int, status: str = "finished", error: str = "") -> dict[str, Any]:
    return {"finished_at": T0 + t, "n_steps": n_steps, "status": status, "error": error}


def test_throughput_counts_good_steps_and_groups_abort_reasons() -> None:
    records = [
        _traj(10, 3),
        _traj(50, 2),
        _traj(70, 3),
        _traj(80, 1, "aborted", "GuestError: guest http://127.0.0.1:4001 gone"),
        _traj(90, 2, "aborted", "GuestError: guest http://127.0.0.1:4002 gone"),
        _traj(100, 3, "setup_failed", "SetupStepError: x"),
        _traj(500, 3),
    ]  # after the run: outside every window
    out = throughput(records, T0, window_bounds(120, 60))
    assert [w["finished_steps"] for w in out] == [5, 3]
    assert [w["finished_steps_per_min"] for w in out] == [5.0, 3.0]
    assert [w["episodes"] for w in out] == [2, 1]
    assert out[1]["aborted"] == 3
    assert out[1]["abort_reasons"] == {"GuestError: guest <url> gone": 2, "SetupStepError: x": 1}


def test_steps_per_minute_of_a_longer_last_window() -> None:
    out = throughput([_traj(100, 9)], T0, [(0.0, 60.0), (60.0, 150.0)])
    assert out[1]["finished_steps_per_min"] == 6.0  # 9 steps in 1.5 min


def test_throughput_ratio_is_last_two_over_windows_two_and_three() -> None:
    assert ratio_last_over_first([1, 10, 12, 11, 9]) == pytest.approx(10 / 11, abs=1e-3)
    assert ratio_last_over_first([0, 10, 10, 5, 5]) == 0.5
    assert ratio_last_over_first([0, 10, 10]) is None  # the two would overlap
    assert ratio_last_over_first([0, 0, 0, 5]) is None  # nothing to compare with


def _sample(t: float, procs: dict[str, tuple[float, int, int]], run_mb: float) -> dict[str, Any]:
    return {
        "t": t,
        "processes": [
            {
                "name": n,
                "pid": int(n.split("#")[1]),
                "started": 1.0,
                "rss_mb": r,
                "fds": f,
                "threads": th,
            }
            for n, (r, f, th) in procs.items()
        ],
        "run_dir_mb": {"store": run_mb / 2, "screenshots": run_mb / 2, "total": run_mb},
    }


def test_growth_is_between_the_second_and_the_last_window_per_process() -> None:
    bounds = window_bounds(3600, 1200)  # three 20-min windows
    samples = []
    for t in range(0, 3601, 60):
        busy = 30 if t % 600 == 0 else 0  # requests in flight now and then
        procs = {
            "run#1": (100 + t / 36, 50 + busy, 10),  # +100 MB per hour
            "guest#7": (40.0, 12 + t // 600, 3),
        }  # one fd more every 10 min
        if t < 1300:
            procs["model-server:policy-0#5"] = (500.0, 30, 8)  # killed in window 2
        else:
            procs["model-server:policy-0#9"] = (520.0, 30, 8)  # its restart
        samples.append(_sample(t, procs, run_mb=t / 60))
    growth = process_growth(samples, bounds)
    # a restarted replica is another process: the killed one ended before the last window
    assert set(growth) == {"run#1", "guest#7", "model-server:policy-0#9"}
    run = growth["run#1"]
    assert run["rss_mb_first"] == pytest.approx(100 + 1800 / 36, abs=1)
    assert run["rss_growth_mb"] == pytest.approx(1200 / 36, abs=1)
    assert run["rss_mb_per_h"] == pytest.approx(100, abs=2)
    assert growth["guest#7"]["rss_growth_mb"] == 0
    # the floors: the run's bursts leave its floor flat, the guest's leak raises its own
    assert (run["fds_floor_first"], run["fds_floor_last"]) == (50, 50)
    guest = growth["guest#7"]
    assert (guest["fds_floor_first"], guest["fds_floor_last"]) == (14, 16)
    assert guest["threads_floor_last"] == guest["threads_floor_first"] == 3
    rates = dir_growth(samples, bounds)
    assert rates["total"] == pytest.approx(60, abs=1)  # 1 MB per minute
    assert rates["store"] == pytest.approx(30, abs=1)


def test_a_process_keeps_its_newest_name_across_samples() -> None:
    """A replica is named by its port until its log names its pool."""
    samples = [
        _sample(
            t,
            {("model-server:4242#5" if t < 60 else "model-server:policy-0#5"): (100 + t, 10, 1)},
            0,
        )
        for t in range(0, 121, 10)
    ]
    growth = process_growth(samples, window_bounds(120, 60))
    assert list(growth) == ["model-server:policy-0#5"]


def test_growth_needs_two_windows_and_uses_the_first_below_three() -> None:
    samples = [_sample(t, {"run#1": (100 + t, 10, 1)}, 0) for t in range(0, 121, 10)]
    assert process_growth(samples, window_bounds(60, 60)) == {}
    growth = process_growth(samples, window_bounds(120, 60))
    assert growth["run#1"]["rss_growth_mb"] == pytest.approx(60, abs=1)


def test_resources_and_faults_per_window() -> None:
    samples = [_sample(t, {"a#1": (10, 5, 2), "b#2": (20, 7, 3)}, 4) for t in (0, 30, 60, 90)]
    bounds = window_bounds(120, 60)
    res = window_resources(samples, bounds)
    assert res[0] == {
        "rss_mb": 30,
        "fds": 12,
        "threads": 5,
        "processes": 2,
        "run_dir_mb": 4,
        "process_kinds": {"a": 1, "b": 1},
    }
    faults = [
        {"t": 10, "recovered": True},
        {"t": 70, "recovered": False},
        {"t": 80, "recovered": True},
    ]
    assert faults_per_window(faults, bounds) == [
        {"faults_injected": 1, "faults_recovered": 1},
        {"faults_injected": 2, "faults_recovered": 1},
    ]
