"""Which task runs an evaluation schedules, and under which group ids."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from cua_rl.cli import cli
from cua_rl.config import RunConfig, load_config
from cua_rl.desktop.providers.local import vscode as local_vscode
from cua_rl.report.eval_report import task_run_id
from cua_rl.rollout.scheduler import GroupScheduler
from cua_rl.runtime.evaluation_run import TaskRunQueue, plan_task_runs
from cua_rl.store.run_store import RunStore
from cua_rl.types import TaskVariant, Trajectory, TrajectoryStatus


def _variant(task_id: str) -> TaskVariant:
    return TaskVariant(
        task_id=task_id,
        domain="os",
        evaluator_name="default",
        instruction="x",
        config=(),
        evaluator={},
    )


def test_plan_skips_done_runs_and_goes_run_major() -> None:
    starts = [_variant("a"), _variant("b")]
    done = {task_run_id("a", 0), task_run_id("b", 1)}
    plan = plan_task_runs(starts, 3, done)
    assert [r.group_id for r in plan] == ["b#0", "a#1", "a#2", "b#2"]
    assert plan_task_runs(starts, 1, {"a#0", "b#0"}) == []


async def test_scheduler_groups_carry_the_task_run_ids() -> None:
    starts = [_variant("a"), _variant("b")]
    queue = TaskRunQueue(plan_task_runs(starts, 2, {"a#1"}))
    scheduler = GroupScheduler(queue.next_variant, 1, group_ids=queue.group_id)
    seen = []
    while (ticket := await scheduler.next_ticket()) is not None:
        seen.append((ticket.group_id, ticket.variant.task_id))
        await scheduler.give_up(ticket)  # finish the group without a trajectory
    assert seen == [("a#0", "a"), ("b#0", "b"), ("b#1", "b")]


def test_preset_is_the_osworld_protocol() -> None:
    cfg = load_config(RunConfig, preset="osworld-verified-eval")
    assert (cfg.episode.max_steps, cfg.episode.temperature, cfg.episode.wait_after_action_s) == (
        50,
        0.0,
        5.0,
    )
    assert not cfg.judge.enabled and cfg.fleet.group_size == 1
    assert cfg.tasks.split == "osworld-verified"


def test_a_bad_checkout_is_reported_before_anything_starts(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["eval", "--osworld", str(tmp_path / "nope"), "--out", str(tmp_path / "run")]
    )
    assert result.exit_code == 1 and "expected an OSWorld checkout" in result.output
    assert not (tmp_path / "run").exists()


def test_a_finished_evaluation_only_rewrites_its_report(tmp_path: Path) -> None:
    task = {"id": "t1", "instruction": "x", "config": [], "evaluator": {"func": "infeasible"}}
    (tmp_path / "osworld" / "examples" / "os").mkdir(parents=True)
    (tmp_path / "osworld" / "examples" / "os" / "t1.json").write_text(json.dumps(task))
    store = RunStore(tmp_path / "run")
    for k, score in enumerate((1.0, 0.0)):
        traj = Trajectory(
            id=f"r{k}",
            variant_id="t1:default",
            steps=(),
            status=TrajectoryStatus.FINISHED,
            score=score,
        )
        store.save_trajectory(traj, group_id=task_run_id("t1", k))
    store.close()
    # every task run is stored: no model server or desktop may start (none could here)
    result = CliRunner().invoke(
        cli,
        [
            "eval",
            "--osworld",
            str(tmp_path / "osworld"),
            "--runs",
            "2",
            "--out",
            str(tmp_path / "run"),
            "--json",
            "tasks.split=null",
            "policy.urls=[http://127.0.0.1:9]",
        ],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["done_before"], summary["done_now"], summary["missing"]) == (2, 0, 0)
    assert summary["mean"] == 0.5 and "episodes" not in summary
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["tasks"]["t1"]["scores"] == [1.0, 0.0]
    assert list(report["domains"]) == ["os"]
    assert (report["domains"]["os"]["mean"], report["domains"]["os"]["count"]) == (0.5, 1)


def test_tasks_that_cannot_run_here_are_reported_not_attempted(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("CUA_RL_CACHE_DIR", str(tmp_path / "cache"))
    # as on a machine without code-server (setup.sh builds it as root)
    monkeypatch.setattr(local_vscode, "CODE_SERVER_DIR", str(tmp_path / "no-code-server"))
    tasks = {
        "vs": {
            "id": "vs",
            "instruction": "x",
            "evaluator": {"func": "infeasible"},
            "config": [{"type": "launch", "parameters": {"command": ["code"]}}],
        },
        "web": {
            "id": "web",
            "instruction": "x",
            "evaluator": {"func": "infeasible"},
            "config": [
                {
                    "type": "chrome_open_tabs",
                    "parameters": {"urls_to_open": ["https://www.example.com/"]},
                }
            ],
        },
        "ok": {"id": "ok", "instruction": "x", "config": [], "evaluator": {"func": "infeasible"}},
    }
    (tmp_path / "osworld" / "examples" / "os").mkdir(parents=True)
    for task_id, task in tasks.items():
        (tmp_path / "osworld" / "examples" / "os" / f"{task_id}.json").write_text(json.dumps(task))
    store = RunStore(tmp_path / "run")  # the runnable task is done: nothing may start
    store.save_trajectory(
        Trajectory(
            id="r0", variant_id="ok:default", steps=(), status=TrajectoryStatus.FINISHED, score=1.0
        ),
        group_id=task_run_id("ok", 0),
    )
    store.close()
    result = CliRunner().invoke(
        cli,
        [
            "eval",
            "--osworld",
            str(tmp_path / "osworld"),
            "--runs",
            "1",
            "--out",
            str(tmp_path / "run"),
            "--json",
            "tasks.split=null",
            "policy.urls=[http://127.0.0.1:9]",
        ],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["task_runs"], summary["missing"], summary["unsupported"]) == (1, 0, 2)
    assert summary["mean"] == 1.0 and summary["rate_all"] == 1 / 3
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["tasks"]["vs"]["state"] == "unsupported"
    assert report["tasks"]["vs"]["reason"].startswith("unsupported_app:code")
    assert report["tasks"]["web"]["reason"] == "network: https://www.example.com/"
