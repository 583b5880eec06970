"""`tasks check --noop-agent` fails the command when the check finds offenders."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from cua_rl.cli.tasks import _exit_on_offenders, check_tasks


def test_offenders_exit_with_status_1_naming_them(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        _exit_on_offenders({"b-task": "scored 1.0", "a-task": "evaluation raised"})
    assert exited.value.code == 1
    assert "2 offender(s): a-task, b-task" in capsys.readouterr().err


def test_no_offenders_returns() -> None:
    _exit_on_offenders({})


def test_help_says_offenders_fail_the_command() -> None:
    result = CliRunner().invoke(check_tasks, ["--help"])
    assert result.exit_code == 0
    assert "Exits with status 1 when there is an offender" in " ".join(result.output.split())
