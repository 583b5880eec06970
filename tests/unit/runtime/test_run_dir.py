"""`train --out` and `rollout --out` never mix a new run into an existing one;
`eval --out` resumes on purpose, and its help says so."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from cua_rl.cli import cli
from cua_rl.errors import RunDirError
from cua_rl.runtime.run_dir import drop_older_resume_exports, prepare_new_run_dir


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


def _no_rollouts(monkeypatch: pytest.MonkeyPatch) -> None:
    """The refusal must come before anything starts: starting rollouts is a failure."""

    async def started(*args: object) -> Counter[str]:
        raise AssertionError("rollouts started although --out holds a run")

    monkeypatch.setattr("cua_rl.runtime.rollout_run.run_rollouts", started)


def test_rollout_refuses_an_existing_run_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_rollouts(monkeypatch)
    run = _old_run(tmp_path / "run")
    (run / "run.sqlite").write_bytes(b"old store")
    result = CliRunner().invoke(cli, ["rollout", "--preset", "quickstart", "--out", str(run)])
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error:"), result.output
    assert "--overwrite" in lines[0] and "--resume" not in lines[0]  # rollout cannot resume
    assert (run / "run.sqlite").read_bytes() == b"old store"  # untouched
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "keep.txt").write_text("mine")
    result = CliRunner().invoke(
        cli, ["rollout", "--preset", "quickstart", "--out", str(notes), "--overwrite"]
    )
    assert result.exit_code == 1 and "not a cua-rl run" in result.output, result.output
    assert (notes / "keep.txt").read_text() == "mine"


def test_rollout_overwrite_starts_afresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def rollouts(cfg: object, run_dir: Path) -> Counter[str]:
        assert not (run_dir / "checkpoints").exists()  # the old run is gone by now
        return Counter(episodes=2)

    monkeypatch.setattr("cua_rl.runtime.rollout_run.run_rollouts", rollouts)
    run = _old_run(tmp_path / "run")
    result = CliRunner().invoke(
        cli,
        [
            "rollout",
            "--preset",
            "quickstart",
            "--out",
            str(run),
            "--overwrite",
            "metrics.live=false",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "episodes=2" in result.output
    assert not (run / "checkpoints").exists()


def test_help_says_what_out_does_with_an_existing_run() -> None:
    def out_help(command: str) -> str:
        text = CliRunner().invoke(cli, [command, "--help"]).output
        return " ".join(text.split())

    assert "refused unless --overwrite" in out_help("rollout")
    assert "refused unless --overwrite" in out_help("train")
    assert "is resumed" in out_help("eval")


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


def test_a_resume_drops_the_resume_exports_of_earlier_resumes(tmp_path: Path) -> None:
    exports = tmp_path / "run" / "exports"
    for name in ("policy-resume-v3", "policy-resume-v7", "prm-resume-v3", "policy"):
        (exports / name).mkdir(parents=True)
        (exports / name / "model.safetensors").write_bytes(b"w")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (exports / "policy-resume-v1").symlink_to(outside)
    current = exports / "policy-resume-v9"
    current.mkdir()
    assert drop_older_resume_exports(exports, "policy", current) == [
        exports / "policy-resume-v3",
        exports / "policy-resume-v7",
    ]
    assert sorted(p.name for p in exports.iterdir()) == [
        "policy",
        "policy-resume-v1",
        "policy-resume-v9",
        "prm-resume-v3",
    ]
    assert outside.is_dir()
