"""SIGTERM and Ctrl-C stop a run within 10 s even while a weight sync's sender thread
is blocked on a replica that never joins the transfer (it used to hold the process for
the sync's whole 600 s deadline)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_ends_a_run_blocked_in_a_weight_sync(sig: signal.Signals, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TESTS), *filter(None, [os.environ.get("PYTHONPATH")])]),
    }
    # stderr to a file, not a pipe nobody reads: a child that logs more than a pipe
    # holds would block on the write and look hung
    err_path = tmp_path / "child.stderr"
    with open(err_path, "w") as err_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests_support.sync_child"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=err_file,
            text=True,
            start_new_session=True,
        )
    elapsed = None
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # blocks until the child is mid-sync (or dies)
        assert line.strip() == "syncing", err_path.read_text()
        signalled = time.monotonic()
        proc.send_signal(sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(30)
            elapsed = time.monotonic() - signalled
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGUSR1)  # the child dumps its threads' stacks
            dumped = time.monotonic() + 5.0
            while "Thread 0x" not in err_path.read_text() and time.monotonic() < dumped:
                time.sleep(0.05)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    err = err_path.read_text()
    assert elapsed is not None, (
        f"the run did not stop within 30 s of {sig.name}; its stderr (thread stacks):\n"
        f"{err[-6000:]}"
    )
    assert elapsed < 10, f"the run took {elapsed:.1f} s to stop after {sig.name}"
    assert proc.returncode != 0  # interrupted, not finished
