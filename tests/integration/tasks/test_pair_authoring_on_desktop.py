"""`cua-rl templates validate --root DIR --on-desktop` on a real local desktop, with
everything (task, template, evaluators, golden, difficulty) in a folder outside
the project: a scaffolded pair passes as written, and a golden that misses says
which metric failed and which values it compared."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cua_rl.cli import cli

pytestmark = pytest.mark.desktop


def _invoke(*args: object):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_pairs_from_a_folder_on_a_desktop(tmp_path: Path, local_desktops) -> None:
    root = tmp_path / "authoring"
    assert (
        _invoke(
            "templates",
            "new",
            "marker-task",
            "--root",
            root,
            "--instruction",
            "Mark the task done.",
        ).exit_code
        == 0
    )
    # A second variant whose golden writes the wrong text.
    template = root / "templates" / "marker-task.json"
    template.write_text(json.dumps({"default": "Mark it done.", "loud": "Mark it DONE."}))
    loud = json.loads((root / "evaluators" / "marker-task" / "default.json").read_text())
    loud["expected"]["rules"]["expected"] = "DONE\n"
    (root / "evaluators" / "marker-task" / "loud.json").write_text(json.dumps(loud))
    golden_file = root / "golden" / "os" / "marker-task.json"
    golden = json.loads(golden_file.read_text())
    golden["loud"] = [{"execute": {"command": "echo done > /tmp/marker-task.done", "shell": True}}]
    golden_file.write_text(json.dumps(golden))
    (root / "difficulty.json").write_text(json.dumps({"marker-task": ["default", "loud"]}))
    result = _invoke("templates", "validate", "--root", root, "--on-desktop")
    assert result.exit_code == 1, result.output
    failures = [line for line in result.stdout.splitlines() if line.strip()]
    assert len(failures) == 1, result.output
    assert failures[0].startswith(
        "marker-task:loud: golden scored 0, expected 1 (metric "
        "'exact_match' scored 0: got 'done\\n', expected "
        "{'expected': 'DONE\\n'})"
    ), failures[0]
    assert "3/4 checks passed" in result.stderr  # initial state x2 (0 each), default golden
