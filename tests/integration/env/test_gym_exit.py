"""A process that makes, resets and closes `cua_rl/Local-v0` and then just exits stops
its desktop on the way out: nothing stale in `vm list`, no error on stderr. Before,
`close()` kept the desktop (as documented) and the exit hook ran after
`concurrent.futures` had shut its thread pools down: `desktop pool: stop failed:
RuntimeError('cannot schedule new futures after shutdown')`, and the desktop stayed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.desktop

SCRIPT = """
import sys
import gymnasium
import cua_rl.env  # noqa: F401
env = gymnasium.make("cua_rl/Local-v0", provider={"type": "local", "state_dir": sys.argv[1]})
env.reset(seed=0)
env.close()
print("closed", flush=True)
"""


def test_interpreter_exit_stops_the_kept_desktop(tmp_path: Path) -> None:
    from tests_support.desktops import local_desktops_unavailable

    if (reason := local_desktops_unavailable()) is not None:
        pytest.skip(reason)
    state = tmp_path / "desktops"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(state)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "closed"
    assert "stop failed" not in done.stderr, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    listed = subprocess.run(
        [sys.executable, "-m", "cua_rl.cli", "vm", "list", "--json", "--state-dir", str(state)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert json.loads(listed.stdout) == []
