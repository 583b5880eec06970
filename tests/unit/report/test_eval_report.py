"""Report aggregation on a hand-made run store, and the Markdown/PNG writers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from cua_rl.report.eval_report import (
    build_report,
    chart_values,
    parse_task_run_id,
    records_from_store,
    render_markdown,
    task_run_id,
    write_report,
)
from cua_rl.store.run_store import RunStore
from cua_rl.types import TaskVariant, Trajectory, TrajectoryStatus

TASKS = {  # task id -> domain, the evaluated task set
    "calc-a": "libreoffice_calc", "calc-b": "libreoffice_calc", "writer-a": "libreoffice_writer",
    "chrome-a": "chrome", "gimp-a": "gimp", "os-a": "os", "os-never": "os",
}


def _variant(task_id: str) -> TaskVariant:
    return TaskVariant(task_id=task_id, domain=TASKS[task_id], evaluator_name="default",
                       instruction="do it", config=(), evaluator={"func": "exact_match"})


def _save(store: RunStore, tid: str, task_id: str, group_id: str, score: float | None,
          status: TrajectoryStatus = TrajectoryStatus.FINISHED) -> None:
    traj = Trajectory(id=tid, variant_id=_variant(task_id).variant_id, steps=(),
                      status=status, score=score)
    store.save_trajectory(traj, group_id=group_id)


@pytest.fixture
def store(tmp_path: Path) -> RunStore:
    store = RunStore(tmp_path / "run")
    for task_id in TASKS:
        store.add_variant(_variant(task_id))
    runs = {  # task -> scores of runs 0, 1
        "calc-a": (1.0, 0.0), "calc-b": (1.0, 1.0), "writer-a": (0.0, 0.0),
        "chrome-a": (0.5, 1.0), "gimp-a": (0.0, 1.0), "os-a": (1.0,),
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
    report = build_report(records_from_store(store), TASKS, runs=2,
                          protocol={"max_steps": 50, "temperature": 0.0})
    tasks = report["tasks"]
    assert tasks["calc-a"]["scores"] == [1.0, 0.0] and tasks["calc-a"]["mean"] == 0.5
    assert [r["run"] for r in tasks["calc-a"]["runs"]] == [0, 1]
    assert tasks["calc-a"]["runs"][1]["trajectory_id"] == "calc-a-1"
    assert tasks["writer-a"]["scores"] == [0.0, 0.0]
    assert tasks["os-a"]["scores"] == [1.0]  # the aborted attempt is not a failure
    assert tasks["os-never"] == {"domain": "os", "mean": None, "scores": [], "runs": []}

    domains = report["domains"]
    assert domains["libreoffice_calc"] == {"mean": 0.75, "count": 2}
    assert domains["chrome"] == {"mean": 0.75, "count": 1}
    assert domains["os"] == {"mean": 1.0, "count": 1}  # os-never is left out, not a 0
    assert list(domains) == sorted(set(TASKS.values()))

    groups = report["groups"]
    assert groups["Office"]["count"] == 3  # calc-a, calc-b, writer-a (task-weighted)
    assert groups["Office"]["mean"] == pytest.approx((0.5 + 1.0 + 0.0) / 3)
    assert groups["Daily"] == {"mean": 0.75, "count": 1,
                               "domains": ["vlc", "thunderbird", "chrome"]}
    assert groups["Professional"]["mean"] == 0.5

    overall = report["overall"]
    assert overall["mean"] == pytest.approx((0.5 + 1.0 + 0.0 + 0.75 + 0.5 + 1.0) / 6)
    assert overall["count"] == 6 and overall["tasks"] == 7
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
    assert "| **Overall** | 6 | **62.5%** |" in md
    assert "| Office (libreoffice_calc + libreoffice_impress + libreoffice_writer) | 3 | 50.0% |" \
        in md
    for domain in set(TASKS.values()):
        assert f"\n### {domain}\n\n| task | mean | run scores |" in md
    assert "| calc-a | 50.0% | 1, 0 |" in md
    assert "| os-never | – | (no run yet) |" in md
    assert "left out of the means): os-never." in md

    with Image.open(files[2]) as png:
        assert png.format == "PNG" and png.width > 300 and png.height > 200


def test_chart_values_skip_empty_groups(store: RunStore) -> None:
    report = build_report(records_from_store(store), TASKS, runs=2)
    report["groups"]["Daily"] = {"mean": None, "count": 0, "domains": []}
    values = chart_values(report)
    assert "Daily" not in values and values["Overall"] == pytest.approx(62.5)
    assert values["libreoffice_calc"] == 75.0
    assert "## Domains" in render_markdown(report)
