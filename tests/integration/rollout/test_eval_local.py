"""`cua-rl eval` on real local desktops with the tiny model: the report files, and
resuming an interrupted evaluation without repeating its scored task runs."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from cua_rl.cli import cli
from cua_rl.config import RunConfig, load_config
from cua_rl.report.eval_report import SCORED_STATUSES
from cua_rl.runtime.evaluation_run import run_evaluation
from cua_rl.store.run_store import RunStore

pytestmark = [pytest.mark.desktop, pytest.mark.model]

REPO = Path(__file__).resolve().parents[3]


def _task(task_id: str, name: str) -> dict:
    return {
        "id": task_id,
        "snapshot": "os",
        "source": "test",
        "related_apps": ["os"],
        "instruction": f"Create an empty file named {name} in the home folder.",
        "config": [
            {
                "type": "execute",
                "parameters": {"command": ["bash", "-c", f"rm -f /home/user/{name}"]},
            }
        ],
        "evaluator": {
            "func": "exact_match",
            "result": {
                "type": "vm_command_line",
                "shell": True,
                "command": f"test -f /home/user/{name} && echo yes || echo no",
            },
            "expected": {"type": "rule", "rules": {"expected": "yes\n"}},
        },
    }


@pytest.fixture
def eval_config(tmp_path: Path, tiny_model_dir: Path, local_desktops: None) -> Path:
    """An eval config file over two tasks in two domains of a tmp OSWorld layout;
    the osworld-verified-eval preset lies under it, as on the command line. The
    protocol's step limit and wait are shortened by overrides (SHORT): `eval` puts
    the protocol over CONFIG, so only an override may deviate from it."""
    examples = tmp_path / "osworld" / "examples"
    for domain, task_id, name in (
        ("os", "t-hello", "hello.txt"),
        ("libreoffice_calc", "t-sheet", "sheet.txt"),
    ):
        (examples / domain).mkdir(parents=True)
        (examples / domain / f"{task_id}.json").write_text(json.dumps(_task(task_id, name)))
    path = tmp_path / "eval.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "tasks": {"source": f"osworld:{tmp_path / 'osworld'}", "split": None},
                "desktops": {"count": 1, "provider": {"state_dir": str(tmp_path / "state")}},
                "fleet": {"actors": 1},
                "episode": {"max_tokens": 16},
                "tiny_model_dir": str(tiny_model_dir),
            }
        )
    )
    return path


SHORT = ("episode.max_steps=2", "episode.wait_after_action_s=0")
"""The two protocol deviations this test makes, as on the command line."""


class CancelAfterFirstRun:
    """Progress that interrupts the evaluation as soon as one task run is scored."""

    def __init__(self) -> None:
        self.first_scored = asyncio.Event()

    def start(self, total: int, done_scores: list[float]) -> None:
        assert total == 4 and not done_scores

    def advance(self, group_id: str, score: float) -> None:
        self.first_scored.set()


async def _interrupted_evaluation(cfg: RunConfig, run_dir: Path) -> None:
    progress = CancelAfterFirstRun()
    task = asyncio.create_task(run_evaluation(cfg, run_dir, 2, progress=progress))
    await progress.first_scored.wait()
    task.cancel()  # what Ctrl-C does to `asyncio.run`
    with pytest.raises(asyncio.CancelledError):
        await task


def _scored_rows(run_dir: Path) -> list[dict]:
    store = RunStore(run_dir)
    try:
        return [r for r in store.trajectory_records() if r["status"] in SCORED_STATUSES]
    finally:
        store.close()


def _check_manifest(run_dir: Path, md: str, model_dir: Path) -> None:
    """manifest.json names this checkout's commit, the model, the deviations and both
    invocations; report.md starts with its summary."""
    manifest = json.loads((run_dir / "manifest.json").read_text())
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout.strip()
    assert manifest["run"]["code"]["commit"] == head
    assert manifest["run"]["runs"] == 2 and manifest["run"]["ended_at"]
    assert manifest["model"]["identity"]["path"] == str(model_dir)
    assert manifest["model"]["identity"]["weights"][0]["file"].endswith(".safetensors")
    assert sorted(manifest["tasks"]["ids"]) == ["t-hello", "t-sheet"]
    assert "episode.max_steps: 2 (protocol: 50)" in manifest["agent"]["protocol"]["deviations"]
    assert manifest["desktops"]["provider"] == "local" and manifest["desktops"]["image"]
    # the interrupted first invocation wrote it; the second is recorded beside it
    assert len(manifest.get("invocations", [])) == 1
    assert md.index("## What ran") < md.index("## Overall and groups")
    assert f"code {head[:12]}" in md


def _check_osworld_layout(run_dir: Path, report: dict) -> None:
    """osworld-results/ holds every scored task run as OSWorld's run.py lays it out."""
    for task_id, row in report["tasks"].items():
        for run in row["runs"]:
            folder = next(
                (run_dir / "osworld-results" / f"run-{run['run']}").glob(
                    f"pyautogui/screenshot/*/{row['domain']}/{task_id}"
                )
            )
            assert (folder / "result.txt").read_text() == f"{run['score']}\n"
            lines = (folder / "traj.jsonl").read_text().splitlines()
            assert len(lines) >= run["steps"]
            shot = json.loads(lines[0])["screenshot_file"]
            assert (folder / shot).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_eval_resumes_and_writes_the_report(
    eval_config: Path, tmp_path: Path, tiny_model_dir: Path
) -> None:
    run_dir = tmp_path / "run"
    cfg = load_config(RunConfig, eval_config, preset="osworld-verified-eval", overrides=SHORT)
    assert cfg.episode.temperature == 0.0 and not cfg.judge.enabled  # from the preset
    asyncio.run(_interrupted_evaluation(cfg, run_dir))
    first = {r["trajectory_id"]: r for r in _scored_rows(run_dir)}
    assert 1 <= len(first) < 4
    assert not (run_dir / "report.json").exists()

    runner = CliRunner()
    args = ["eval", str(eval_config), "--runs", "2", "--out", str(run_dir), "--json", *SHORT]
    result = runner.invoke(cli, args)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["task_runs"] == 4 and summary["missing"] == 0
    assert summary["domains"]["os"] == {
        "tasks": 1,
        "attempted": 1,
        "scored": 1,
        "setup_failed": 0,
        "unsupported": 0,
        "mean": 0.0,
        "rate_all": 0.0,
    }
    assert summary["done_before"] == len(first)
    assert summary["done_before"] + summary["done_now"] == 4

    rows = _scored_rows(run_dir)
    assert len(rows) == 4  # tasks x runs: nothing ran twice
    assert sorted(r["group_id"] for r in rows) == [
        "t-hello#0",
        "t-hello#1",
        "t-sheet#0",
        "t-sheet#1",
    ]
    for tid, row in first.items():  # the first invocation's runs are untouched
        assert next(r for r in rows if r["trajectory_id"] == tid) == row

    report = json.loads((run_dir / "report.json").read_text())
    assert set(report["tasks"]) == {"t-hello", "t-sheet"}
    for row in report["tasks"].values():
        assert len(row["scores"]) == 2 and [r["run"] for r in row["runs"]] == [0, 1]
        assert row["mean"] == 0.0  # the tiny model does not solve tasks
    assert {d: (r["mean"], r["count"]) for d, r in report["domains"].items()} == {
        "libreoffice_calc": (0.0, 1),
        "os": (0.0, 1),
    }
    assert report["groups"]["Office"]["count"] == 1 and report["groups"]["Daily"]["count"] == 0
    assert report["groups"]["OS"]["count"] == 1
    overall = report["overall"]
    assert {k: v for k, v in overall.items() if not k.startswith("interval_")} == {
        "mean": 0.0,
        "count": 2,
        "tasks": 2,
        "attempted": 2,
        "scored": 2,
        "setup_failed": 0,
        "unsupported": 0,
        "rate_all": 0.0,
        "runs_done": 4,
        "runs_expected": 4,
        "incomplete_tasks": [],
    }
    assert overall["interval_all"]["low"] == overall["interval_all"]["high"] == 0.0
    assert report["pass_k"]["2"]["pass_at_k"]["all"] == 0.0
    assert report["protocol"]["max_steps"] == 2 and report["protocol"]["runs"] == 2
    md = (run_dir / "report.md").read_text()
    assert "### libreoffice_calc" in md
    assert "| **Overall** | 2 | 2 | 2 | 0 | 0 | 0.0% [0.0, 0.0] | 0.0% [0.0, 0.0] |" in md
    assert (run_dir / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    _check_manifest(run_dir, md, tiny_model_dir)
    _check_osworld_layout(run_dir, report)

    again = runner.invoke(cli, args)  # all done: nothing starts, the report is rewritten
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["done_now"] == 0
    assert len(_scored_rows(run_dir)) == 4
