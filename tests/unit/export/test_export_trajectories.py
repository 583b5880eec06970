"""`cua-rl export trajectories` on run stores written through `RunStore` as a run
writes them: which trajectories are written (filters, aborted ones), what a line
holds, and one `Error:` line for a run directory that is not one."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from tests_support.viewer_runs import add_failed_trajectories, build_run, vote_scores

from cua_rl.cli import cli
from cua_rl.store.run_store import RunStore


def export(*args: str) -> tuple[int, str]:
    done = CliRunner().invoke(cli, ["export", "trajectories", *args])
    return done.exit_code, done.output


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_every_scored_trajectory_is_a_line_and_aborted_ones_are_counted(tmp_path: Path) -> None:
    built = build_run(tmp_path / "run")
    add_failed_trajectories(tmp_path / "run")
    out = tmp_path / "out.jsonl"
    code, output = export(str(tmp_path / "run"), "--out", str(out), "--json")
    assert code == 0, output
    summary = json.loads(output)
    assert (summary["trajectories"], summary["steps"]) == (3, 12)
    assert summary["skipped"] == {"aborted": 1, "setup_failed": 1}
    records = lines(out)
    assert [r["trajectory_id"] for r in records] == built.trajectory_ids
    first = records[0]
    assert (first["task_id"], first["variant_id"], first["score"], first["outcome"]) == (
        "t1",
        "t1:default",
        1.0,
        1,
    )
    assert first["policy_versions"] == [0, 0, 1, 1]
    # integrated step rewards R_i = O + lam * mean(votes)
    assert first["step_rewards"] == [1 + sum(vote_scores(0, i)) / 3 for i in range(4)]
    assert [v["score"] for v in first["steps"][1]["verdicts"]] == list(vote_scores(0, 1))
    store = RunStore.read_only(tmp_path / "run")
    for i, step in enumerate(first["steps"]):
        kind = ("left_click", "type", "left_click_drag", "key")[i]
        assert step["messages"][-1] == {
            "role": "assistant",
            "content": [{"type": "text", "text": f"<think>step {i} of traj-0</think> {kind}"}],
        }
        assert all(isinstance(m["content"], list) for m in step["messages"])
        # the history window: the current screen and up to two past ones, in order
        shown = built.shots["traj-0"][max(0, i - 2) : i + 1]
        assert step["images"] == [str(store.screenshot_path(n).resolve()) for n in shown]
        parts = [p for m in step["messages"] for p in m["content"]]
        assert sum(p == {"type": "image"} for p in parts) == len(step["images"])
    assert first["images"] == [
        str(store.screenshot_path(n).resolve()) for n in built.shots["traj-0"]
    ]


def test_success_only_and_min_reward_filter_on_the_evaluator_score(tmp_path: Path) -> None:
    build_run(tmp_path / "run", n_trajectories=4)  # scores 1, 1, 1, 0
    store = RunStore(tmp_path / "run")
    store._db.execute("UPDATE trajectories SET score = 0.5 WHERE trajectory_id = 'traj-1'")
    store.close()
    out = tmp_path / "out.jsonl"
    code, output = export(str(tmp_path / "run"), "--out", str(out), "--success-only", "--json")
    assert code == 0, output
    assert [r["trajectory_id"] for r in lines(out)] == ["traj-0", "traj-1", "traj-2"]
    assert json.loads(output)["skipped"] == {"not_success": 1}
    code, output = export(
        str(tmp_path / "run"), "--out", str(out), "--min-reward", "0.75", "--json"
    )
    assert code == 0, output
    assert [r["trajectory_id"] for r in lines(out)] == ["traj-0", "traj-2"]
    assert json.loads(output)["skipped"] == {"below_min_reward": 2}


def test_copy_images_makes_a_folder_that_stands_alone(tmp_path: Path) -> None:
    built = build_run(tmp_path / "run", n_trajectories=1, n_steps=2)
    out = tmp_path / "sft" / "data.jsonl"
    code, output = export(str(tmp_path / "run"), "--out", str(out), "--copy-images")
    assert code == 0, output
    assert output.startswith("1 trajectories (2 steps) -> ")
    (record,) = lines(out)
    assert record["images"] == [f"images/{n}" for n in built.shots["traj-0"]]
    source = RunStore.read_only(tmp_path / "run")
    for name in built.shots["traj-0"]:
        assert (out.parent / "images" / name).read_bytes() == source.screenshot_path(
            name
        ).read_bytes()


def test_a_missing_screenshot_or_damaged_row_loses_only_its_trajectory(tmp_path: Path) -> None:
    built = build_run(tmp_path / "run", n_trajectories=4)
    RunStore.read_only(tmp_path / "run").screenshot_path(built.shots["traj-1"][0]).unlink()
    (tmp_path / "secret.png").write_bytes(b"not yours")
    store = RunStore(tmp_path / "run")  # a name that would lead out of the run directory
    store._db.execute(
        "UPDATE steps SET screenshot_before = '../../../secret.png' "
        "WHERE trajectory_id = 'traj-2' AND step_index = 1"
    )
    store._db.execute(
        "UPDATE steps SET actions_json = '[{\"kind\": ' "
        "WHERE trajectory_id = 'traj-3' AND step_index = 0"
    )
    store.close()
    code, output = export(str(tmp_path / "run"), "--out", "-")
    assert code == 0, output
    records = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    assert [r["trajectory_id"] for r in records] == ["traj-0"]
    assert "skipped: 2 missing_screenshot, 1 unreadable_row" in output


def test_not_a_run_directory_is_one_error_line(tmp_path: Path) -> None:
    for run in (tmp_path / "absent", tmp_path):
        code, output = export(str(run))
        assert code == 1
        assert output.startswith("Error: ") and output.count("\n") == 1, output
    build_run(tmp_path / "ok", n_trajectories=1)
    code, output = export(str(tmp_path / "ok"), "--out", str(tmp_path))
    assert code == 1 and output.startswith("Error: ") and "a directory" in output, output
    (tmp_path / "run.sqlite").write_bytes(b"not a database at all, just text" * 8)
    code, output = export(str(tmp_path))
    assert code == 1 and output.startswith("Error: ") and "run.sqlite" in output, output


def test_a_saved_config_that_does_not_validate_is_one_error_line(tmp_path: Path) -> None:
    build_run(tmp_path / "run", n_trajectories=1)
    store = RunStore(tmp_path / "run")
    store.save_config({"episode": {"history_images": "many"}})
    store.close()
    code, output = export(str(tmp_path / "run"))
    assert code == 1 and output.count("\n") == 1, output
    assert output.startswith("Error: ") and "runs.config_json" in output, output
