"""A first `cua-rl train --preset quickstart` without a terminal says what it is doing:
a notice and progress while the tiny model is built, then periodic status lines,
all before the summary, and the same account in RUN_DIR/logs/run.log."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.desktop, pytest.mark.model]


def test_unbuilt_model_run_reports_build_and_status_before_summary(
    tmp_path: Path, local_desktops: None
) -> None:
    pytest.importorskip("transformers")
    run = tmp_path / "run"
    env = {**os.environ, "CUA_RL_TINY_PRIMING_STEPS": "10"}  # a fast, barely primed build
    args = [
        sys.executable,
        "-m",
        "cua_rl.cli",
        "train",
        "--preset",
        "quickstart",
        "--out",
        str(run),
        f"tiny_model_dir={tmp_path / 'model'}",
        f"desktops.provider.state_dir={tmp_path / 'state'}",
        "fleet.max_groups=3",
        "episode.max_steps=2",
        "metrics.status_interval_s=1",
        "metrics.tensorboard=false",
    ]
    done = subprocess.run(
        args,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )  # pipes: not a terminal
    assert done.returncode == 0, done.stderr[-3000:]
    err = done.stderr.splitlines()
    notice = _first(err, "building the tiny model in")
    progress = _first(err, "priming step 10/10")
    status = [i for i, line in enumerate(err) if "cua_rl.status: [training]" in line]
    assert notice < progress < status[0], done.stderr[-3000:]
    assert len(status) >= 2, done.stderr[-3000:]
    assert "episodes=" in err[status[-1]] and "eta=" in err[status[-1]]
    summary = done.stdout.strip().splitlines()
    assert len(summary) == 1 and summary[0].startswith("run_dir="), done.stdout
    logged = (run / "logs" / "run.log").read_text()
    assert "building the tiny model" in logged and "priming step 10/10" in logged
    assert any("cua_rl.status" in line and "[training]" in line for line in logged.splitlines())


def _first(lines: list[str], text: str) -> int:
    found = [i for i, line in enumerate(lines) if text in line]
    assert found, f"no line with {text!r}:\n" + "\n".join(lines[-40:])
    return found[0]
