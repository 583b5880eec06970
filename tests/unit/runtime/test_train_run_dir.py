"""`train --out` never mixes a new run into an existing one."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from cua_rl.cli import cli
from cua_rl.errors import RunDirError
from cua_rl.runtime.train_command import prepare_new_run_dir


def _old_run(path: Path) -> Path:
    (path / "checkpoints").mkdir(parents=True)
    (path / "config.yaml").write_text("{}\n")
    (path / "checkpoints" / "policy-1").write_text("old weights")
    return path


def test_existing_run_is_refused_in_one_line(tmp_path: Path) -> None:
    run = _old_run(tmp_path / "run")
    result = CliRunner().invoke(cli, ["train", "--preset", "quickstart", "--out", str(run)])
    assert result.exit_code == 1
    assert result.output.count("\n") == 1 and "--resume" in result.output, result.output
    assert (run / "checkpoints" / "policy-1").read_text() == "old weights"  # untouched


def test_overwrite_deletes_the_old_run_only(tmp_path: Path) -> None:
    run = _old_run(tmp_path / "run")
    prepare_new_run_dir(run, overwrite=True)
    assert run.is_dir() and not any(run.iterdir())
    other = tmp_path / "notes"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    with pytest.raises(RunDirError, match="not a cua-rl run"):
        prepare_new_run_dir(other, overwrite=True)  # never deletes a folder that is no run
    assert (other / "keep.txt").read_text() == "mine"
    prepare_new_run_dir(tmp_path / "fresh", overwrite=False)
    prepare_new_run_dir(tmp_path / "fresh", overwrite=False)  # empty: fine


def test_resume_of_a_non_run(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["train", "--resume", str(tmp_path)])
    assert result.exit_code == 1 and "not a cua-rl train run" in result.output
