"""`tasks verify` without desktops: what each task is judged by, which jobs run, how two
outcomes become one verdict, and the resumable ledger."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cua_rl.errors import TaskFormatError
from cua_rl.tasks.check_jobs import Outcome
from cua_rl.tasks.verify import Ledger, Verdict, combine, plan_verify, summarize, task_kind
from cua_rl.types import TaskVariant

RULE = {
    "func": "check_moved_jpgs",
    "result": {"type": "list_directory", "path": "/d"},
    "expected": {"type": "rule", "rules": {"expected": ["a.jpg"]}},
}
GOLD = {
    "func": "compare_table",
    "result": {"type": "vm_file", "path": "/a.xlsx", "dest": "a"},
    "expected": {"type": "cloud_file", "path": "https://x/gold.xlsx", "dest": "g"},
}
INFEASIBLE = {"func": "infeasible"}


def _task(tmp: Path, task_id: str, evaluator: dict[str, Any], domain: str = "os") -> TaskVariant:
    source = tmp / "examples" / domain / f"{task_id}.json"
    return TaskVariant(
        task_id=task_id,
        domain=domain,
        evaluator_name="default",
        instruction="do it",
        config=(),
        evaluator=evaluator,
        source_path=str(source),
    )


def _golden(root: Path, task: TaskVariant, steps: list[dict[str, Any]]) -> None:
    path = root / "golden" / task.domain / f"{task.task_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"default": steps}))


def test_kind_follows_what_the_evaluator_compares_with(tmp_path: Path) -> None:
    assert task_kind(_task(tmp_path, "r", RULE)) == "rule"
    assert task_kind(_task(tmp_path, "g", GOLD)) == "gold_file"
    assert task_kind(_task(tmp_path, "i", INFEASIBLE)) == "infeasible"
    listed = {**GOLD, "expected": [{"type": "rule", "rules": {}}, GOLD["expected"]]}
    assert task_kind(_task(tmp_path, "l", listed)) == "gold_file"
    download = [
        {
            "type": "download",
            "parameters": {
                "files": [{"url": "https://x/gold.xlsx", "path": "/home/user/gold.xlsx"}]
            },
        }
    ]
    fetched = {
        **RULE,
        "postconfig": download,
        "expected": {"type": "vm_file", "path": "/home/user/gold.xlsx", "dest": "g"},
    }
    assert task_kind(_task(tmp_path, "p", fetched)) == "gold_file"
    unread = {**RULE, "postconfig": download}  # downloaded, never read by the metric
    assert task_kind(_task(tmp_path, "u", unread)) == "rule"


def test_plan_sets_apart_what_cannot_be_proven_and_runs_two_halves(tmp_path: Path) -> None:
    rule, nogolden, gold, infeasible, blocked = (
        _task(tmp_path, "rule", RULE),
        _task(tmp_path, "nogolden", RULE),
        _task(tmp_path, "gold", GOLD),
        _task(tmp_path, "inf", INFEASIBLE),
        _task(tmp_path, "blocked", RULE),
    )
    _golden(tmp_path, rule, [{"execute": {"command": "true", "shell": True}}])
    _golden(tmp_path, gold, [{"execute": {"command": "true", "shell": True}}])
    runnable = {"rule", "nogolden", "gold", "inf"}
    plan = plan_verify(
        [rule, nogolden, gold, infeasible, blocked],
        runnable,
        {"blocked": "network: needs the internet"},
        tmp_path,
    )
    decided = {v.task_id: v for v in plan.decided}
    assert decided["blocked"].status == "not_runnable"
    assert decided["blocked"].reason == "network: needs the internet"
    assert decided["gold"].status == "not_provable"
    assert decided["nogolden"].status == "fail_golden"
    assert "no golden solution" in decided["nogolden"].reason
    assert set(plan.pending) == {"rule", "inf"}
    halves = [(j.task.task_id, j.golden, j.declared, j.expected) for j in plan.jobs]
    assert ("rule", None, None, 0.0) in halves
    assert ("rule", ({"execute": {"command": "true", "shell": True}},), None, 1.0) in halves
    assert ("inf", None, None, 0.0) in halves and ("inf", (), "failure", 1.0) in halves
    with_assets = plan_verify([gold], runnable, {}, tmp_path, real_assets=True)
    assert set(with_assets.pending) == {"gold"} and len(with_assets.jobs) == 2


def test_a_malformed_golden_is_a_failed_golden_naming_the_file(tmp_path: Path) -> None:
    task = _task(tmp_path, "bad", RULE)
    _golden(tmp_path, task, [{"teleport": 1}])
    (verdict,) = plan_verify([task], {"bad"}, {}, tmp_path).decided
    assert verdict.status == "fail_golden" and "bad.json" in verdict.reason
    assert "teleport" in verdict.reason


@pytest.mark.parametrize(
    ("untouched", "solved", "status"),
    [
        (0.0, 1.0, "pass"),
        (1.0, 1.0, "fail_untouched"),
        (0.0, 0.0, "fail_golden"),
        (1.0, 0.0, "fail_untouched"),
    ],
)
def test_combine_names_the_half_that_failed(
    tmp_path: Path, untouched: float, solved: float, status: str
) -> None:
    task = _task(tmp_path, "t", RULE)
    verdict = combine(
        task,
        Outcome("t", "default", 0.0, untouched),
        Outcome("t", "default", 1.0, solved, detail="check_moved_jpgs: 0 ([])"),
    )
    assert verdict.status == status
    if status == "fail_golden":
        assert "scored 0, expected 1" in verdict.reason and "check_moved_jpgs" in verdict.reason


def test_an_error_in_either_half_is_an_error_and_infeasible_rules_are_kept_apart(
    tmp_path: Path,
) -> None:
    task = _task(tmp_path, "t", RULE)
    broken = combine(
        task,
        Outcome("t", "default", 0.0, 0.0),
        Outcome("t", "default", 1.0, error="RuntimeError: golden[0] exit 1"),
    )
    assert broken.status == "error" and "golden[0] exit 1" in broken.reason
    infeasible = _task(tmp_path, "i", INFEASIBLE)
    held = combine(infeasible, Outcome("i", "default", 0.0, 0.0), Outcome("i", "default", 1.0, 1.0))
    assert (held.status, held.ok) == ("infeasible", True)
    lost = combine(infeasible, Outcome("i", "default", 0.0, 0.0), Outcome("i", "default", 1.0, 0.0))
    assert (lost.status, lost.ok) == ("infeasible", False)


def test_ledger_resumes_passes_and_retries_failures(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path)
    ledger.add(Verdict("a", "os", "rule", "pass"))
    ledger.add(Verdict("b", "os", "rule", "fail_golden", "scored 0"))
    ledger.add(Verdict("c", "os", "rule", "error", "dead desktop"))
    ledger.add(Verdict("d", "os", "gold_file", "not_provable", "stand-ins"))
    ledger.add(Verdict("e", "os", "infeasible", "infeasible", "declared failure 0", ok=False))
    ledger.add(Verdict("f", "os", "infeasible", "infeasible"))
    ledger.add(Verdict("g", "vs_code", "rule", "not_runnable", "unsupported_app:code"))
    again = Ledger(tmp_path)
    # set-apart tasks are decided again (the machine may have gained VS Code or assets)
    assert [t for t in "abcdefg" if again.settled(t)] == ["a", "f"]
    assert Ledger(tmp_path, fresh=True).done == {}
    (tmp_path / "verify.jsonl").write_text('{"task_id": "a", "dom')
    with pytest.raises(TaskFormatError, match=r"verify.jsonl:1: not a verdict"):
        Ledger(tmp_path)


def test_summary_counts_attempted_tasks_only(tmp_path: Path) -> None:
    summary = summarize(
        [
            Verdict("a", "os", "rule", "pass"),
            Verdict("b", "os", "rule", "fail_untouched", "scored 1"),
            Verdict("c", "vlc", "gold_file", "not_provable"),
            Verdict("d", "vlc", "infeasible", "infeasible"),
        ],
        seconds=3.0,
    )
    assert (summary["attempted"], summary["passed"], summary["pass_rate"]) == (2, 1, 0.5)
    assert summary["infeasible_ok"] == 1
    assert summary["per_domain"]["vlc"] == {
        "tasks": 2,
        "attempted": 0,
        "pass": 0,
        "not_provable": 1,
        "infeasible": 1,
    }


def test_verify_command_rejects_an_unknown_task_id(tmp_path: Path) -> None:
    from cua_rl.cli import cli

    examples = tmp_path / "osworld" / "examples" / "os"
    examples.mkdir(parents=True)
    (examples / "t1.json").write_text(
        json.dumps(
            {"id": "t1", "snapshot": "os", "instruction": "x", "config": [], "evaluator": RULE}
        )
    )
    result = CliRunner().invoke(
        cli,
        [
            "tasks",
            "verify",
            "--osworld",
            str(tmp_path / "osworld"),
            "--task",
            "nope",
            "--out",
            str(tmp_path / "out"),
        ],
    )
    assert result.exit_code == 2 and "nope" in result.output


def test_tasks_listed_as_needing_real_assets_are_set_apart_unless_they_are_there(
    tmp_path: Path,
) -> None:
    task = _task(tmp_path, "profile", RULE, domain="thunderbird")
    _golden(tmp_path, task, [{"execute": {"command": "true", "shell": True}}])
    (tmp_path / "needs_real_assets.json").write_text(
        json.dumps({"profile": "reads the messages of the task's Thunderbird profile"})
    )
    (verdict,) = plan_verify([task], {"profile"}, {}, tmp_path).decided
    assert verdict.status == "not_provable" and "Thunderbird profile" in verdict.reason
    assert set(plan_verify([task], {"profile"}, {}, tmp_path, real_assets=True).pending) == {
        "profile"
    }
    (tmp_path / "needs_real_assets.json").write_text('{"profile": ""}')
    with pytest.raises(TaskFormatError, match="needs_real_assets.json"):
        plan_verify([task], {"profile"}, {}, tmp_path)
