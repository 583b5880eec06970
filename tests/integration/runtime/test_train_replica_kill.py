"""`cua-rl train --preset quickstart` whose only policy replica is SIGKILLed after the
first update: the run restarts it, catches it up and finishes by itself."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cua_rl.learner.service import latest_checkpoint

pytestmark = [pytest.mark.desktop, pytest.mark.model]


def _replica_pid(owner: int, log: Path) -> int | None:
    """The child of `owner` whose output goes to `log` (one replica's log file)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if ppid == owner and os.readlink(entry / "fd" / "1") == str(log):
                return int(entry.name)
        except (OSError, IndexError, ValueError):
            continue  # exited meanwhile, or not ours to read
    return None


def test_run_recovers_its_only_policy_replica(
    tmp_path: Path, primed_tiny_model_dir: Path, local_desktops: None
) -> None:
    run = tmp_path / "run"
    args = [
        sys.executable,
        "-m",
        "cua_rl.cli",
        "train",
        "--preset",
        "quickstart",
        "--out",
        str(run),
        f"tiny_model_dir={primed_tiny_model_dir}",
        f"desktops.provider.state_dir={tmp_path / 'state'}",
        "metrics.live=false",
        "policy.supervision.health_interval_s=0.5",
        "--json",
    ]
    proc = subprocess.Popen(
        args, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    log = run / "logs" / "policy-0.log"
    try:
        deadline = time.monotonic() + 600
        victim = None
        while victim is None:  # the first update is checkpointed: the learner is ahead
            assert proc.poll() is None, "the run ended before the replica could be killed"
            assert time.monotonic() < deadline, "no policy update within 10 minutes"
            if latest_checkpoint(run / "checkpoints", "policy"):
                victim = _replica_pid(proc.pid, log)
            time.sleep(0.5)  # poll interval
        os.kill(victim, signal.SIGKILL)
        out, err = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    assert proc.returncode == 0, err[-3000:]
    assert json.loads(out)["policy_updates"] == 2
    assert "restarted" in err and "given up" not in err, err[-3000:]
    assert _replica_pid(proc.pid, log) is None  # nothing left running
