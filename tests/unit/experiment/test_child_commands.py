"""A cell's command in a child process: its stderr kept in the cell's log, its --json
result read back, a failure one line naming the command and its last log line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cua_rl.errors import RunFailed
from cua_rl.experiment.child import ChildCommands, last_line


def test_a_command_s_json_comes_back_and_its_stderr_goes_to_the_log(tmp_path: Path) -> None:
    lines: list[str] = []
    log = tmp_path / "logs" / "list.log"
    spec = tmp_path / "one.yaml"
    spec.write_text(
        "name: one\nseeds: [1]\nbaseline: a\narms: [{name: a, preset: quickstart}]\n"
        "eval: {versions: [1], sets: {in_domain: ['tasks.ids=[x]']}}\n"
    )
    out = ChildCommands(lines.append).run(
        ["experiment", str(spec), "--out", str(tmp_path / "exp"), "--list", "--json"],
        log,
        timeout_s=120,
    )
    assert [c["cell"] for c in json.loads(out)["cells"]] == ["before-s1", "a-s1"]
    assert "$ cua-rl experiment" in log.read_text()


def test_a_failing_command_is_one_line_with_its_last_log_line(tmp_path: Path) -> None:
    log = tmp_path / "show.log"
    with pytest.raises(RunFailed) as caught:
        ChildCommands(lambda _line: None).run(
            ["runs", "show", str(tmp_path / "nothing")], log, timeout_s=120
        )
    message = str(caught.value)
    assert "`cua-rl runs show" in message and "exited 2" in message
    assert last_line(log) in message and str(log) in message
