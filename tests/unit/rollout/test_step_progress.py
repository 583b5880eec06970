"""A task's progress probe (rollout/step_progress.py): counts to labels, the probe's
output read defensively, and the task file's `step_progress` checked at load."""

from __future__ import annotations

from pathlib import Path

import pytest

from cua_rl.rollout.step_progress import labels_from_counts, parse_count
from cua_rl.tasks.osworld import check_task, step_progress_problem, task_from_json


def test_a_step_is_good_exactly_when_the_count_rose_during_it() -> None:
    # after setup 0; lit, miss, repeat, lit, probe failed, lit again
    counts = [0, 1, 1, 1, 2, None, 3]
    assert labels_from_counts(counts) == [1, -1, -1, 1, None, None]
    assert labels_from_counts([2]) == []
    assert labels_from_counts([3, 2]) == [-1]  # progress undone is no progress


@pytest.mark.parametrize(
    ("output", "count"),
    [
        ("2\n", 2),
        ("starting\n  3  \n\n", 3),
        ("", None),
        ("lit", None),
        ("-1", None),
        ("2.5", None),
    ],
)
def test_the_probe_output_is_its_last_line_as_a_count(output: str, count: int | None) -> None:
    assert parse_count(output) == count


@pytest.mark.parametrize(
    ("spec", "ok"),
    [
        ({"command": ["cat", "/tmp/tiles_lit"]}, True),
        ({"command": "cat /tmp/x | wc -l", "shell": True}, True),
        ({"command": "cat /tmp/x"}, False),  # a string needs shell: true
        ({"command": []}, False),
        ({"command": ["cat"], "shell": "yes"}, False),
        ({"command": ["cat"], "every": 2}, False),  # an unknown key
        (["cat"], False),
    ],
)
def test_a_task_files_step_progress_is_checked(spec: object, ok: bool) -> None:
    assert (step_progress_problem(spec) is None) is ok


def test_the_probe_reaches_the_variant_and_a_bad_one_is_named(tmp_path: Path) -> None:
    data = {
        "id": "t1",
        "instruction": "Light the tiles.",
        "config": [],
        "evaluator": {
            "func": "exact_match",
            "result": {"type": "vm_command_line", "command": ["true"]},
            "expected": {"type": "rule", "rules": {"expected": "x"}},
        },
        "step_progress": {"command": ["cat", "/tmp/tiles_lit"]},
    }
    file = tmp_path / "os" / "t1.json"
    assert not check_task(data, file).problems
    assert task_from_json(data, file, "os").step_progress == {"command": ["cat", "/tmp/tiles_lit"]}
    bad = check_task({**data, "step_progress": {"command": 3}}, file).problems
    assert [p.json_path for p in bad] == ["$.step_progress"]
    assert "non-empty array of strings" in str(bad[0])
