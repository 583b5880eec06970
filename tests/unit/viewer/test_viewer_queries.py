import sqlite3
import time
from pathlib import Path

import pytest
from tests_support.viewer_runs import add_bulk_trajectories, build_run, vote_scores

from cua_rl.reward.advantages import policy_advantages, step_rewards
from cua_rl.store.run_store import RunStore
from cua_rl.viewer import queries
from cua_rl.viewer.queries import MAX_PAGE, TrajectoryFilter, open_readonly
from cua_rl.viewer.trajectory_detail import trajectory_detail


@pytest.fixture
def run(tmp_path: Path):
    built = build_run(tmp_path / "run")
    conn = open_readonly(built.run_dir)
    yield built, conn
    conn.close()


def test_readonly_never_creates_or_writes(tmp_path: Path, run) -> None:
    with pytest.raises(FileNotFoundError, match="no run store"):
        open_readonly(tmp_path / "missing")
    assert not (tmp_path / "missing").exists()
    _, conn = run
    with pytest.raises(sqlite3.OperationalError):
        conn.execute("DELETE FROM trajectories")


def test_reads_while_a_writer_holds_a_transaction(run) -> None:
    built, conn = run
    writer = RunStore(built.run_dir)
    writer._db.execute("BEGIN IMMEDIATE")
    writer._db.execute("UPDATE trajectories SET score = 5 WHERE trajectory_id = 'traj-0'")
    start = time.perf_counter()
    page = queries.trajectories_page(conn)  # WAL: the reader sees the last commit at once
    assert time.perf_counter() - start < 1.0 and page["total"] == 3
    writer._db.execute("COMMIT")
    writer.close()


def test_overview_and_tasks(run) -> None:
    _, conn = run
    ov = queries.overview(conn)
    assert ov["runs"][0]["trajectories"] == 3
    assert ov["runs"][0]["success_rate"] == pytest.approx(2 / 3)
    assert ov["counters"]["policy_updates"] == 2 and ov["policy_versions"] == [0]
    tasks = queries.tasks_page(conn)
    by_id = {t["task_id"]: t for t in tasks["items"]}
    assert tasks["total"] == 2 and set(by_id) == {"t1", "t2"}
    assert by_id["t1"]["success_rate"] == pytest.approx(2 / 3) and by_id["t1"]["domain"] == "os"
    assert by_id["t2"]["trajectories"] == 0 and by_id["t2"]["success_rate"] is None
    assert queries.tasks_page(conn, offset=1, limit=1)["items"][0]["task_id"] == "t2"


def test_task_variants_and_adaptation_history(run) -> None:
    _, conn = run
    variants = queries.task_variants(conn, "t1")
    assert [v["variant_id"] for v in variants] == ["t1:default", "t1:harder@1"]
    assert variants[0]["trajectories"] == 3 and variants[1]["success_rate"] is None
    history = queries.adaptation_history(conn, "t1")
    assert history["total"] == 2
    decision, proposal = history["items"]
    assert decision["kind"] == "adapt_decision" and decision["accepted"] is True
    assert decision["acc_candidate"] == 0.5 and decision["parent"] == "t1:default"
    assert proposal["summaries"] == ["the agent found the menu fast"]
    assert queries.adaptation_history(conn, "t2")["items"] == []


def test_trajectory_detail_matches_the_learners_rewards(run) -> None:
    _, conn = run
    detail = trajectory_detail(conn, "traj-1")
    assert detail is not None and detail["task_id"] == "t1" and detail["outcome"] == 1
    assert detail["instruction"] == "Do t1 with default"
    assert len(detail["steps"]) == 4
    step = detail["steps"][2]
    assert step["actions"][0]["kind"] == "left_click_drag"
    assert step["actions"][0]["start"] == [100, 600]
    assert [v["score"] for v in step["votes"]] == list(vote_scores(1, 2))
    assert "reasoning 0 on step 2 of traj-1" in step["votes"][0]["text"]
    rewards = {
        f"traj-{t}": step_rewards(1 if t < 2 else -1, [vote_scores(t, i) for i in range(4)])
        for t in range(3)
    }
    adv = {(a.trajectory_id, a.step_index): a.advantage for a in policy_advantages(rewards)}
    for s in detail["steps"]:
        assert s["reward"] == pytest.approx(rewards["traj-1"][s["index"]])
        assert s["advantage"] == pytest.approx(adv.get(("traj-1", s["index"]), 0.0))
    assert trajectory_detail(conn, "nope") is None


def test_trajectory_pages_are_keyset_and_filtered(tmp_path: Path) -> None:
    build_run(tmp_path, n_trajectories=3)
    add_bulk_trajectories(tmp_path, 25)
    conn = open_readonly(tmp_path)
    seen, cursor, pages = [], None, 0
    while True:
        page = queries.trajectories_page(conn, cursor=cursor, limit=10)
        assert page["total"] == 28 and len(page["items"]) <= 10
        seen += [t["trajectory_id"] for t in page["items"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == 3 and len(seen) == len(set(seen)) == 28
    assert seen[:3] == ["traj-2", "traj-1", "traj-0"]  # newest first
    only_t1 = queries.trajectories_page(conn, TrajectoryFilter(task_id="t1"))
    assert {t["task_id"] for t in only_t1["items"]} == {"t1"} and only_t1["total"] == 3 + 4
    wins = queries.trajectories_page(conn, TrajectoryFilter(outcome=1))
    assert all(t["outcome"] == 1 for t in wins["items"]) and wins["total"] == 2 + 9
    v0 = queries.trajectories_page(conn, TrajectoryFilter(policy_version=0))
    assert v0["total"] == 28
    assert queries.trajectories_page(conn, TrajectoryFilter(aborted="only"))["total"] == 0
    assert queries.trajectories_page(conn, limit=10**6)["limit"] == MAX_PAGE
    conn.close()


def test_aborted_trajectories_have_no_reward(tmp_path: Path) -> None:
    build_run(tmp_path)
    store = RunStore(tmp_path)
    store._db.execute(
        "UPDATE trajectories SET status = 'aborted', score = NULL, "
        "outcome = NULL WHERE trajectory_id = 'traj-0'"
    )
    store.close()
    conn = open_readonly(tmp_path)
    only = queries.trajectories_page(conn, TrajectoryFilter(aborted="only"))
    assert [t["trajectory_id"] for t in only["items"]] == ["traj-0"]
    assert queries.trajectories_page(conn, TrajectoryFilter(aborted="exclude"))["total"] == 2
    detail = trajectory_detail(conn, "traj-0")
    assert detail is not None and all(s["reward"] is None for s in detail["steps"])
    assert queries.tasks_page(conn)["items"][0]["aborted"] == 1
    conn.close()


def test_cursor_is_validated() -> None:
    with pytest.raises(ValueError, match="bad cursor"):
        queries.decode_cursor("nonsense")
    assert queries.decode_cursor(queries.encode_cursor(12.5, "a|b")) == (12.5, "a|b")


def test_setup_failures_show_their_reason_and_never_count(tmp_path: Path) -> None:
    build_run(tmp_path)
    store = RunStore(tmp_path)
    store._db.execute(
        "UPDATE trajectories SET status = 'setup_failed', score = NULL, "
        "outcome = NULL, error = 'config[1] (''launch''): no google-chrome' "
        "WHERE trajectory_id = 'traj-0'"
    )
    store.close()
    conn = open_readonly(tmp_path)
    only = queries.trajectories_page(conn, TrajectoryFilter(aborted="only"))
    assert [t["trajectory_id"] for t in only["items"]] == ["traj-0"]
    assert only["items"][0]["status"] == "setup_failed"
    detail = trajectory_detail(conn, "traj-0")
    assert detail is not None and detail["error"] == "config[1] ('launch'): no google-chrome"
    assert queries.trajectories_page(conn, TrajectoryFilter(aborted="exclude"))["total"] == 2
    assert queries.tasks_page(conn)["items"][0]["aborted"] == 1
    conn.close()
