"""The viewer on OSWorld results folders: ours (`cua-rl export osworld-results`) and
one laid out as other harnesses publish theirs (actions as dicts, a line that is
not JSON, a task that never finished); screenshots and recordings are served only
from the folder's own files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer
from click.testing import CliRunner
from tests_support.eval_runs import build_eval_run, jpeg, manifest_of
from tests_support.viewer_runs import tiny_png

from cua_rl.cli import cli
from cua_rl.viewer.server import make_app

SCORES = {"c1": ("libreoffice_calc", [1.0, 0.0]), "o1": ("os", [0.0, 1.0])}


@pytest.fixture
async def ours(tmp_path: Path):
    run_dir = build_eval_run(tmp_path / "run", SCORES, manifest=manifest_of(model="m"))
    (run_dir / "recordings").mkdir()
    (run_dir / "recordings" / "c1-0.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42 recording")
    assert CliRunner().invoke(cli, ["export", "osworld-results", str(run_dir)]).exit_code == 0
    async with TestClient(TestServer(make_app(run_dir / "osworld-results"))) as client:
        yield client


async def test_our_folder_reads_as_a_run(ours) -> None:
    overview = await (await ours.get("/api/overview")).json()
    assert overview["trajectories_total"] == 4
    assert overview["runs"][0]["success_rate"] == 0.5
    tasks = await (await ours.get("/api/tasks")).json()
    assert {t["task_id"]: t["domain"] for t in tasks["items"]} == {
        "c1": "libreoffice_calc",
        "o1": "os",
    }
    page = await (await ours.get("/api/trajectories?task=c1&outcome=1")).json()
    [item] = page["items"]
    assert item["trajectory_id"] == "m:c1:0" and item["group_id"] == "c1#0"
    detail = await (await ours.get("/api/trajectories/m:c1:0")).json()
    assert [s["code"] for s in detail["steps"]] == ["pyautogui.click(10, 20)", "DONE"]
    assert detail["steps"][0]["response"] == "Action: step 0."
    assert detail["recording"] == "/recordings/m:c1:0.mp4"
    shot = await ours.get(f"/screenshots/{detail['steps'][0]['screenshot_after']}")
    assert shot.status == 200 and (await shot.read())[:8] == b"\x89PNG\r\n\x1a\n"
    video = await ours.get("/recordings/m:c1:0.mp4")
    assert video.status == 200 and (await video.read()).startswith(b"\x00\x00\x00\x18ftyp")
    assert (await ours.get("/recordings/m:o1:0.mp4")).status == 404
    assert (await ours.get(f"/screenshots/{'0' * 40}.png")).status == 404


def _published(root: Path) -> Path:
    """gpt-4o's folder as an older OSWorld run.py wrote it."""
    model = root / "pyautogui" / "screenshot" / "gpt-4o"
    done = model / "chrome" / "task-a"
    done.mkdir(parents=True)
    (done / "step_0.png").write_bytes(tiny_png(1, (64, 36)))
    (done / "step_1_20250101@101500.png").write_bytes(tiny_png(2, (64, 36)))
    (done / "step_2_20250101@101530.png").write_bytes(jpeg(3))  # a JPEG named .png
    (done / "traj.jsonl").write_text(
        "\n".join(
            [
                json.dumps(
                    {
                        "step_num": 1,
                        "action_timestamp": "20250101@101500",
                        "action": {"action_type": "CLICK", "x": 5, "y": 6},
                        "reward": 0,
                        "done": False,
                        "info": {},
                        "screenshot_file": "step_1_20250101@101500.png",
                    }
                ),
                "this line is not JSON",
                json.dumps(
                    {
                        "step_num": 2,
                        "action_timestamp": "20250101@101530",
                        "action": "DONE",
                        "response": "Done.",
                        "screenshot_file": "../../../../../../etc/passwd",
                    }
                ),
            ]
        )
        + "\n"
    )
    (done / "result.txt").write_text("1\n")
    unfinished = model / "chrome" / "task-b"
    unfinished.mkdir()
    (unfinished / "traj.jsonl").write_text(
        json.dumps(
            {"step_num": 1, "action": "pyautogui.press('enter')", "screenshot_file": "gone.png"}
        )
        + "\n"
    )
    return model


async def test_a_published_folder_reads_and_names_what_is_odd(tmp_path: Path) -> None:
    model = _published(tmp_path / "results")
    async with TestClient(TestServer(make_app(model))) as client:
        overview = await (await client.get("/api/overview")).json()
        assert overview["trajectories_total"] == 2
        done = await (await client.get("/api/trajectories/gpt-4o:task-a:0")).json()
        assert done["score"] == 1.0 and done["status"] == "finished"
        assert "line 2: not JSON" in done["error"]
        assert [s["code"] for s in done["steps"]] == [
            '{"action_type": "CLICK", "x": 5, "y": 6}',
            "DONE",
        ]
        first = done["steps"][0]
        assert first["screenshot_before"] != first["screenshot_after"]  # step_0.png first
        assert (done["screen_w"], done["screen_h"]) == (64, 36)
        # a screenshot_file outside the folder is never served: the step has none
        assert done["steps"][1]["screenshot_after"] == ""
        assert done["steps"][1]["screenshot_before"] == first["screenshot_after"]
        before = await client.get(f"/screenshots/{first['screenshot_before']}")
        assert before.status == 200 and before.content_type == "image/png"
        unfinished = await (await client.get("/api/trajectories/gpt-4o:task-b:0")).json()
        assert unfinished["status"] == "aborted" and unfinished["score"] is None
        assert "no result.txt" in unfinished["error"]


def test_a_folder_that_is_neither_a_run_nor_results_is_refused(tmp_path: Path) -> None:
    (tmp_path / "x" / "y").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match="no run store"):
        make_app(tmp_path / "x")
