"""SIGTERM and Ctrl-C stop a run within 10 s even while a weight sync's sender thread
is blocked on a replica that never joins the transfer (it used to hold the process for
the sync's whole 600 s deadline)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_ends_a_run_blocked_in_a_weight_sync(sig: signal.Signals) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(TESTS), *filter(None, [os.environ.get("PYTHONPATH")])])}
    proc = subprocess.Popen([sys.executable, "-m", "tests_support.sync_child"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # blocks until the child is mid-sync (or dies)
        assert line.strip() == "syncing", proc.stderr.read() if proc.stderr else ""
        signalled = time.monotonic()
        proc.send_signal(sig)
        proc.wait(30)
        elapsed = time.monotonic() - signalled
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    assert elapsed < 10, f"the run took {elapsed:.1f} s to stop after {sig.name}"
    assert proc.returncode != 0  # interrupted, not finished
