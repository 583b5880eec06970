"""`cua-rl train --resume DIR key=value`: the overrides apply on top of the saved
config (click hands the first one over as CONFIG; it used to be dropped silently, so
`train.max_policy_updates=N` could not extend a run), and a CONFIG file is refused."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from cua_rl.cli.root import cli


def _saved_run(tmp_path: Path) -> Path:
    shown = CliRunner().invoke(cli, ["config", "show", "--preset", "quickstart"])
    assert shown.exit_code == 0, shown.output
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(shown.stdout)
    return run


def test_every_override_of_a_resume_applies_the_first_one_too(tmp_path: Path) -> None:
    run = _saved_run(tmp_path)
    result = CliRunner().invoke(
        cli,
        [
            "train",
            "--resume",
            str(run),
            "policy.replicas=2",
            "prm.replicas=3",
            "--dry-run",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    roles = [p["role"] for p in json.loads(result.stdout)["processes"]]
    assert sum(r.startswith("policy replica") for r in roles) == 2
    assert sum(r.startswith("prm replica") for r in roles) == 3


def test_a_resume_refuses_a_config_file(tmp_path: Path) -> None:
    run = _saved_run(tmp_path)
    result = CliRunner().invoke(
        cli, ["train", "--resume", str(run), str(run / "config.yaml"), "--dry-run"]
    )
    assert result.exit_code == 2
    assert "give overrides (key=value), not a CONFIG file" in result.output
