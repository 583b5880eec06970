"""Report aggregation on a hand-made run store, and the Markdown/PNG writers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from cua_rl.report.eval_markdown import render_counts, render_markdown
from cua_rl.report.eval_output import chart_values, write_report
from cua_rl.report.eval_report import (
    build_report,
    done_task_runs,
    parse_task_run_id,
    records_from_store,
    setup_failures_from_store,
    task_run_id,
)
from cua_rl.store.run_store import RunStore
from cua_rl.types import TaskVariant, Trajectory, TrajectoryStatus

TASKS = {  # task id -> domain, the evaluated task set
    "calc-a": "libreoffice_calc",
    "calc-b": "libreoffice_calc",
    "writer-a": "libreoffice_writer",
    "chrome-a": "chrome",
    "gimp-a": "gimp",
    "os-a": "os",
    "os-never": "os",
}


INTERVALS = ("interval_all", "interval_scored")


def _counts(row: dict) -> dict:
    """A scope's counts and rates without its intervals (tested in test_eval_stats.py)."""
    return {k: v for k, v in row.items() if k not in INTERVALS}


def _variant(task_id: str) -> TaskVariant:
    return TaskVariant(
        task_id=task_id,
        domain=TASKS[task_id],
        evaluator_name="default",
        instruction="do it",
        config=(),
        evaluator={"func": "exact_match"},
    )


def _save(
    store: RunStore,
    tid: str,
    task_id: str,
    group_id: str,
    score: float | None,
    status: TrajectoryStatus = TrajectoryStatus.FINISHED,
) -> None:
    traj = Trajectory(
        id=tid, variant_id=_variant(task_id).variant_id, steps=(), status=status, score=score
    )
    store.save_trajectory(traj, group_id=group_id)


@pytest.fixture
def store(tmp_path: Path) -> RunStore:
    store = RunStore(tmp_path / "run")
    for task_id in TASKS:
        store.add_variant(_variant(task_id))
    runs = {  # task -> scores of runs 0, 1
        "calc-a": (1.0, 0.0),
        "calc-b": (1.0, 1.0),
        "writer-a": (0.0, 0.0),
        "chrome-a": (0.5, 1.0),
        "gimp-a": (0.0, 1.0),
        "os-a": (1.0,),
    }
    for task_id, scores in runs.items():
        for k, score in enumerate(scores):
            status = TrajectoryStatus.STEP_LIMIT if score == 0 else TrajectoryStatus.FINISHED
            _save(store, f"{task_id}-{k}", task_id, task_run_id(task_id, k), score, status)
    # none of these may change a number:
    _save(store, "aborted", "os-a", task_run_id("os-a", 1), None, TrajectoryStatus.ABORTED)
    _save(store, "again", "calc-a", task_run_id("calc-a", 1), 1.0)  # recorded twice: first wins
    _save(store, "extra-run", "writer-a", task_run_id("writer-a", 2), 1.0)  # beyond --runs 2
    _save(store, "rollout", "os-a", "g000001", 1.0)  # not an evaluation group
    yield store
    store.close()


def test_task_run_ids_round_trip() -> None:
    assert parse_task_run_id(task_run_id("a#b", 3)) == ("a#b", 3)
    assert parse_task_run_id("g000001") is None
    assert parse_task_run_id("task#") is None


def test_aggregates_tasks_domains_groups_and_overall(store: RunStore) -> None:
    report = build_report(
        records_from_store(store), TASKS, runs=2, protocol={"max_steps": 50, "temperature": 0.0}
    )
    tasks = report["tasks"]
    assert tasks["calc-a"]["scores"] == [1.0, 0.0] and tasks["calc-a"]["mean"] == 0.5
    assert [r["run"] for r in tasks["calc-a"]["runs"]] == [0, 1]
    assert tasks["calc-a"]["runs"][1]["trajectory_id"] == "calc-a-1"
    assert tasks["writer-a"]["scores"] == [0.0, 0.0]
    assert tasks["os-a"]["scores"] == [1.0]  # the aborted attempt is not a failure
    assert tasks["os-never"] == {
        "domain": "os",
        "mean": None,
        "scores": [],
        "runs": [],
        "state": "not_run",
    }

    domains = report["domains"]
    assert domains["libreoffice_calc"]["mean"] == 0.75
    assert domains["libreoffice_calc"]["count"] == 2
    assert domains["chrome"]["mean"] == 0.75 and domains["chrome"]["count"] == 1
    # os-never is left out of the mean over scored tasks, and counts as 0 over all tasks
    assert _counts(domains["os"]) == {
        "mean": 1.0,
        "count": 1,
        "tasks": 2,
        "attempted": 1,
        "scored": 1,
        "setup_failed": 0,
        "unsupported": 0,
        "rate_all": 0.5,
    }
    assert list(domains) == sorted(set(TASKS.values()))

    groups = report["groups"]
    assert groups["Office"]["count"] == 3  # calc-a, calc-b, writer-a (task-weighted)
    assert groups["Office"]["mean"] == pytest.approx((0.5 + 1.0 + 0.0) / 3)
    assert groups["Daily"]["mean"] == 0.75 and groups["Daily"]["count"] == 1
    assert groups["Daily"]["domains"] == ["vlc", "thunderbird", "chrome"]
    assert groups["OS"]["domains"] == ["os"] and groups["OS"]["tasks"] == 2
    assert groups["Professional"]["mean"] == 0.5

    overall = report["overall"]
    assert overall["mean"] == pytest.approx((0.5 + 1.0 + 0.0 + 0.75 + 0.5 + 1.0) / 6)
    assert overall["count"] == 6 and overall["tasks"] == 7
    assert overall["rate_all"] == pytest.approx((0.5 + 1.0 + 0.0 + 0.75 + 0.5 + 1.0) / 7)
    assert overall["runs_done"] == 11 and overall["runs_expected"] == 14
    assert overall["incomplete_tasks"] == ["os-never"]
    assert report["protocol"] == {"max_steps": 50, "temperature": 0.0, "runs": 2}


def test_without_a_task_set_the_records_define_the_scope(store: RunStore) -> None:
    report = build_report(records_from_store(store))
    assert "os-never" not in report["tasks"]
    assert report["tasks"]["writer-a"]["scores"] == [0.0, 0.0, 1.0]  # no run limit given
    assert report["overall"]["runs_expected"] is None


def test_writes_json_markdown_and_png(store: RunStore, tmp_path: Path) -> None:
    report = build_report(records_from_store(store), TASKS, runs=2, protocol={"max_steps": 50})
    files = write_report(report, tmp_path / "out", title="Eval test")
    assert [f.name for f in files] == ["report.json", "report.md", "report.png"]
    assert json.loads(files[0].read_text()) == report

    md = files[1].read_text()
    assert md.startswith("# Eval test\n")
    overall = report["overall"]
    scored, every = overall["interval_scored"], overall["interval_all"]
    assert (
        f"| **Overall** | 7 | 6 | 6 | 0 | 0 | 62.5% [{100 * scored['low']:.1f}, "
        f"{100 * scored['high']:.1f}] | 53.6% [{100 * every['low']:.1f}, "
        f"{100 * every['high']:.1f}] |"
    ) in md
    assert (
        "| Office (libreoffice_calc + libreoffice_impress + libreoffice_writer) "
        "| 3 | 3 | 3 | 0 | 0 | 50.0% ["
    ) in md
    assert "| 1 | 53.6% | 62.5% |" in md  # pass@1 is the rate, over all and over scored
    for domain in set(TASKS.values()):
        assert f"\n### {domain}\n\n| task | mean | run scores |" in md
    assert "| calc-a | 50.0% | 1, 0 |" in md
    assert "| os-never | – | (no run yet) |" in md
    assert "left out of the means): os-never." in md

    with Image.open(files[2]) as png:
        assert png.format == "PNG" and png.width > 300 and png.height > 200


def test_chart_values_skip_empty_groups(store: RunStore) -> None:
    report = build_report(records_from_store(store), TASKS, runs=2)
    report["groups"]["Daily"] |= {"rate_all": None, "tasks": 0, "domains": []}
    values = chart_values(report)
    assert "Daily" not in values  # a scope without tasks has no bar
    rate, low, high = values["Overall"]  # the OSWorld figure: over all tasks
    assert rate == pytest.approx(100 * 3.75 / 7) and low <= rate <= high
    assert values["libreoffice_calc"][0] == 75.0
    assert "## Domains" in render_markdown(report)


def test_setup_failures_and_unsupported_tasks_are_counted_apart(tmp_path: Path) -> None:
    tasks = {
        "calc-a": "libreoffice_calc",
        "calc-b": "libreoffice_calc",
        "os-a": "os",
        "code-a": "vs_code",
        "multi-a": "multi_apps",
    }
    store = RunStore(tmp_path / "run")
    for task_id, domain in tasks.items():
        store.add_variant(
            TaskVariant(
                task_id=task_id,
                domain=domain,
                evaluator_name="default",
                instruction="do it",
                config=(),
                evaluator={"func": "exact_match"},
            )
        )
    variant = lambda t: (  # noqa: E731
        TaskVariant(
            task_id=t,
            domain=tasks[t],
            evaluator_name="default",
            instruction="do it",
            config=(),
            evaluator={"func": "exact_match"},
        ).variant_id
    )
    store.save_trajectory(
        Trajectory(
            id="t1",
            variant_id=variant("calc-a"),
            steps=(),
            status=TrajectoryStatus.FINISHED,
            score=1.0,
        ),
        group_id=task_run_id("calc-a", 0),
    )
    store.save_trajectory(
        Trajectory(
            id="t2", variant_id=variant("calc-b"), steps=(), status=TrajectoryStatus.SETUP_FAILED
        ),
        group_id=task_run_id("calc-b", 0),
        error="launch: `google-chrome` not found",
    )
    failed = setup_failures_from_store(store)
    assert failed == {task_run_id("calc-b", 0): "launch: `google-chrome` not found"}
    records = records_from_store(store)
    assert [r.task_id for r in records] == ["calc-a"]  # a setup failure is never a 0
    assert done_task_runs(records, failed) == {task_run_id("calc-a", 0), task_run_id("calc-b", 0)}
    report = build_report(
        records,
        tasks,
        runs=1,
        setup_failed=failed,
        unsupported={"code-a": "VS Code is not packaged by Debian"},
    )
    store.close()
    assert report["tasks"]["calc-b"]["state"] == "setup_failed"
    assert report["tasks"]["calc-b"]["reason"] == "launch: `google-chrome` not found"
    assert report["tasks"]["code-a"]["state"] == "unsupported"
    overall = report["overall"]
    assert (
        overall["tasks"],
        overall["attempted"],
        overall["scored"],
        overall["setup_failed"],
        overall["unsupported"],
    ) == (5, 2, 1, 1, 1)
    assert overall["mean"] == 1.0 and overall["rate_all"] == pytest.approx(1 / 5)
    calc = report["domains"]["libreoffice_calc"]
    assert (calc["attempted"], calc["scored"], calc["setup_failed"]) == (2, 1, 1)
    assert calc["rate_all"] == 0.5
    grouped = {d for g in report["groups"].values() for d in g["domains"]}
    assert set(tasks.values()) <= grouped and "Other" not in report["groups"]
    assert overall["runs_expected"] == 4  # the unsupported task is never run
    md = render_markdown(report)
    assert "Task runs scored: 1 of 4 (1 unsupported task(s) not run)." in md
    assert render_counts(report) in md
    assert (
        "| libreoffice_calc | 2 | 2 | 1 | 1 | 0 | 100.0% [100.0, 100.0] | 50.0% [0.0, 100.0] |"
        in render_counts(report)
    )
    assert "| calc-b | – | setup_failed: launch: `google-chrome` not found |" in md
    assert "| code-a | – | unsupported: VS Code is not packaged by Debian |" in md
