"""Which setups may be forked to a whole group (`cua_rl/desktop/fork_safety.py`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cua_rl.desktop.fork_safety import setup_not_forkable
from cua_rl.tasks.sources import DATA_ROOT, load_task_set

OSWORLD = Path(__file__).resolve().parents[3].parent / "shared" / "osworld"


def execute(command: str) -> dict:
    return {"type": "execute", "parameters": {"command": command, "shell": True}}


def test_the_local_suite_forks() -> None:
    for variants in load_task_set("local", None, (), DATA_ROOT):
        task = variants[0]
        assert setup_not_forkable(task.task_id, task.config) is None, task.task_id


@pytest.mark.parametrize(
    ("step", "why"),
    [
        (execute("echo $(date +%s) > ~/stamp"), "reads the clock"),
        (execute("python3 -c 'import datetime; print(datetime.date.today())'"), "reads the clock"),
        (execute("touch ~/f_$RANDOM"), "draws random values"),
        (execute("mktemp -d"), "draws random values"),
        (
            {"type": "chrome_open_tabs", "parameters": {"urls_to_open": ["https://example.org"]}},
            "opens live web pages",
        ),
        (
            {
                "type": "launch",
                "parameters": {"command": ["google-chrome", "https://news.example"]},
            },
            "opens live web pages",
        ),
    ],
)
def test_nondeterministic_setups_are_set_up_per_rollout(step: dict, why: str) -> None:
    reason = setup_not_forkable("t", [execute("mkdir -p ~/x"), step])
    assert reason is not None and reason.startswith("config[1]") and why in reason


def test_local_pages_and_plain_files_fork() -> None:
    steps = [
        {"type": "launch", "parameters": {"command": ["chromium", "http://127.0.0.1:8000"]}},
        {
            "type": "download",
            "parameters": {
                "files": [{"url": "https://example.org/a.xlsx", "path": "/home/user/a.xlsx"}]
            },
        },
        {"type": "open", "parameters": {"path": "/home/user/a.xlsx"}},
    ]
    assert setup_not_forkable("t", steps) is None


@pytest.mark.skipif(not OSWORLD.is_dir(), reason=f"OSWorld task files not at {OSWORLD}")
def test_osworld_tasks_are_classified() -> None:
    """Every OSWorld task gets an answer; live pages and clocks are among the reasons."""
    reasons = {}
    for path in sorted(OSWORLD.rglob("*.json")):
        task = json.loads(path.read_text())
        if isinstance(task, dict) and "config" in task:
            reasons[task["id"]] = setup_not_forkable(task["id"], task["config"])
    forkable = sum(1 for r in reasons.values() if r is None)
    print(f"\n{forkable} of {len(reasons)} OSWorld tasks fork")
    assert len(reasons) >= 300 and 0 < forkable < len(reasons)
    assert any("live web pages" in r for r in reasons.values() if r)
