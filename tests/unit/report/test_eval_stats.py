"""An evaluation's intervals and pass@k, on a stored evaluation whose per-task scores
are written by hand: every figure equals its hand value, each interval brackets
its rate, pass@1 is the rate and pass@k never decreases with k."""

from __future__ import annotations

from pathlib import Path

import pytest

from cua_rl.report.eval_report import build_report, records_from_store, task_run_id
from cua_rl.store.run_store import RunStore
from cua_rl.types import TaskVariant, Trajectory, TrajectoryStatus

SCORES = {  # task -> (domain, scores of runs 0, 1, 2)
    "c1": ("libreoffice_calc", (1.0, 1.0, 1.0)),
    "c2": ("libreoffice_calc", (1.0, 0.0, 0.0)),
    "w1": ("libreoffice_writer", (0.0, 0.0, 0.0)),
    "o1": ("os", (1.0, 0.0, 1.0)),
    "o2": ("os", (0.5, 0.5, 1.0)),
    "g1": ("gimp", ()),  # never scored: counts 0 over all tasks
}
RUNS = 3


@pytest.fixture
def report(tmp_path: Path) -> dict:
    store = RunStore(tmp_path / "run")
    for task_id, (domain, scores) in SCORES.items():
        variant = TaskVariant(
            task_id=task_id,
            domain=domain,
            evaluator_name="default",
            instruction="do it",
            config=(),
            evaluator={"func": "exact_match"},
        )
        store.add_variant(variant)
        for k, score in enumerate(scores):
            store.save_trajectory(
                Trajectory(
                    id=f"{task_id}-{k}",
                    variant_id=variant.variant_id,
                    steps=(),
                    status=TrajectoryStatus.FINISHED,
                    score=score,
                ),
                group_id=task_run_id(task_id, k),
            )
    try:
        return build_report(
            records_from_store(store), {t: d for t, (d, _) in SCORES.items()}, runs=RUNS
        )
    finally:
        store.close()


# by hand: task means c1 1, c2 1/3, w1 0, o1 2/3, o2 2/3 (g1 none)
MEANS = {"c1": 1.0, "c2": 1 / 3, "w1": 0.0, "o1": 2 / 3, "o2": 2 / 3}
PASS_AT = {  # task -> pass@1, pass@2, pass@3 (1 - C(n-c, k)/C(n, k); o2: best of k)
    "c1": (1, 1, 1),
    "c2": (1 / 3, 2 / 3, 1),
    "w1": (0, 0, 0),
    "o1": (2 / 3, 1, 1),
    "o2": (2 / 3, (0.5 + 1 + 1) / 3, 1),
}
PASS_HAT = {  # task -> pass^1, pass^2, pass^3 (C(c, k)/C(n, k); o2: worst of k)
    "c1": (1, 1, 1),
    "c2": (1 / 3, 0, 0),
    "w1": (0, 0, 0),
    "o1": (2 / 3, 1 / 3, 0),
    "o2": (2 / 3, (0.5 + 0.5 + 0.5) / 3, 0.5),
}


def test_every_figure_equals_its_hand_value(report: dict) -> None:
    overall = report["overall"]
    assert overall["mean"] == pytest.approx(sum(MEANS.values()) / 5)
    assert overall["rate_all"] == pytest.approx(sum(MEANS.values()) / 6)
    assert (overall["interval_scored"]["n"], overall["interval_all"]["n"]) == (5, 6)
    calc = report["domains"]["libreoffice_calc"]
    assert (calc["mean"], calc["rate_all"]) == pytest.approx((2 / 3, 2 / 3))
    assert report["domains"]["gimp"]["mean"] is None
    assert report["domains"]["gimp"]["interval_scored"]["method"] == "none"
    # gimp's only task never ran: 0 over all tasks, with nothing to resample
    gimp = report["domains"]["gimp"]["interval_all"]
    assert (gimp["estimate"], gimp["low"], gimp["high"]) == (0.0, 0.0, 0.0)
    for k in (1, 2, 3):
        best = report["pass_k"][str(k)]["pass_at_k"]
        worst = report["pass_k"][str(k)]["pass_hat_k"]
        assert best["tasks"] == worst["tasks"] == 5
        assert best["scored"] == pytest.approx(sum(v[k - 1] for v in PASS_AT.values()) / 5)
        assert best["all"] == pytest.approx(sum(v[k - 1] for v in PASS_AT.values()) / 6)
        assert worst["scored"] == pytest.approx(sum(v[k - 1] for v in PASS_HAT.values()) / 5)
        assert worst["all"] == pytest.approx(sum(v[k - 1] for v in PASS_HAT.values()) / 6)
    assert list(report["pass_k"]) == ["1", "2", "3"]
    assert "nested percentile bootstrap" in report["statistics"]["interval"]


def test_intervals_bracket_the_rates_and_pass_at_1_is_the_rate(report: dict) -> None:
    scopes = {"Overall": report["overall"], **report["groups"], **report["domains"]}
    for name, row in scopes.items():
        if row["tasks"] == 0:
            continue
        every = row["interval_all"]
        assert every["low"] <= row["rate_all"] <= every["high"], name
        assert every["estimate"] == pytest.approx(row["rate_all"]) and every["level"] == 0.95
        if row["mean"] is not None:
            scored = row["interval_scored"]
            assert scored["low"] <= row["mean"] <= scored["high"], name
    first = report["pass_k"]["1"]["pass_at_k"]
    assert first["all"] == pytest.approx(report["overall"]["rate_all"])
    assert first["scored"] == pytest.approx(report["overall"]["mean"])
    table = [report["pass_k"][str(k)] for k in (1, 2, 3)]
    for low, high in zip(table, table[1:], strict=False):
        assert high["pass_at_k"]["all"] >= low["pass_at_k"]["all"]
        assert high["pass_hat_k"]["all"] <= low["pass_hat_k"]["all"]


def test_the_report_is_the_same_when_written_again(report: dict, tmp_path: Path) -> None:
    store = RunStore(tmp_path / "run")
    try:
        again = build_report(
            records_from_store(store), {t: d for t, (d, _) in SCORES.items()}, runs=RUNS
        )
    finally:
        store.close()
    assert again == report
