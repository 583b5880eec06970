"""`cua-rl eval` on real local desktops with the tiny model: the report files, and
resuming an interrupted evaluation without repeating its scored task runs."""

from __future__ import annotations

import asyncio
import json
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


def _task(task_id: str, name: str) -> dict:
    return {
        "id": task_id, "snapshot": "os", "source": "test", "related_apps": ["os"],
        "instruction": f"Create an empty file named {name} in the home folder.",
        "config": [{"type": "execute",
                    "parameters": {"command": ["bash", "-c", f"rm -f /home/user/{name}"]}}],
        "evaluator": {
            "func": "exact_match",
            "result": {"type": "vm_command_line", "shell": True,
                       "command": f"test -f /home/user/{name} && echo yes || echo no"},
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
    for domain, task_id, name in (("os", "t-hello", "hello.txt"),
                                  ("libreoffice_calc", "t-sheet", "sheet.txt")):
        (examples / domain).mkdir(parents=True)
        (examples / domain / f"{task_id}.json").write_text(json.dumps(_task(task_id, name)))
    path = tmp_path / "eval.yaml"
    path.write_text(yaml.safe_dump({
        "tasks": {"source": f"osworld:{tmp_path / 'osworld'}", "split": None},
        "desktops": {"count": 1, "provider": {"state_dir": str(tmp_path / "state")}},
        "fleet": {"actors": 1},
        "episode": {"max_tokens": 16},
        "tiny_model_dir": str(tiny_model_dir),
    }))
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


def test_eval_resumes_and_writes_the_report(eval_config: Path, tmp_path: Path) -> None:
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
    assert summary["domains"]["os"] == {"tasks": 1, "attempted": 1, "scored": 1,
                                        "setup_failed": 0, "unsupported": 0, "mean": 0.0,
                                        "rate_all": 0.0}
    assert summary["done_before"] == len(first)
    assert summary["done_before"] + summary["done_now"] == 4

    rows = _scored_rows(run_dir)
    assert len(rows) == 4  # tasks x runs: nothing ran twice
    assert sorted(r["group_id"] for r in rows) == ["t-hello#0", "t-hello#1",
                                                   "t-sheet#0", "t-sheet#1"]
    for tid, row in first.items():  # the first invocation's runs are untouched
        assert next(r for r in rows if r["trajectory_id"] == tid) == row

    report = json.loads((run_dir / "report.json").read_text())
    assert set(report["tasks"]) == {"t-hello", "t-sheet"}
    for row in report["tasks"].values():
        assert len(row["scores"]) == 2 and [r["run"] for r in row["runs"]] == [0, 1]
        assert row["mean"] == 0.0  # the tiny model does not solve tasks
    assert {d: (r["mean"], r["count"]) for d, r in report["domains"].items()} == {
        "libreoffice_calc": (0.0, 1), "os": (0.0, 1)}
    assert report["groups"]["Office"]["count"] == 1 and report["groups"]["Daily"]["count"] == 0
    assert report["groups"]["OS"]["count"] == 1
    assert report["overall"] == {
        "mean": 0.0, "count": 2, "tasks": 2, "attempted": 2, "scored": 2, "setup_failed": 0,
        "unsupported": 0, "rate_all": 0.0, "runs_done": 4, "runs_expected": 4,
        "incomplete_tasks": []}
    assert report["protocol"]["max_steps"] == 2 and report["protocol"]["runs"] == 2
    md = (run_dir / "report.md").read_text()
    assert "### libreoffice_calc" in md
    assert "| **Overall** | 2 | 2 | 2 | 0 | 0 | 0.0% | 0.0% |" in md
    assert (run_dir / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    again = runner.invoke(cli, args)  # all done: nothing starts, the report is rewritten
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["done_now"] == 0
    assert len(_scored_rows(run_dir)) == 4
