"""Desktop records outlive a killed run: `vm list` marks them stale, `vm down --stale`
cleans them (state dirs included), and `vm down --all` leaves desktops of a live
run alone unless --force. Real desktops, a real owner process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests_support.desktops import local_desktops_unavailable

from cua_rl.desktop.providers.local import state as st

pytestmark = pytest.mark.desktop

if (_reason := local_desktops_unavailable()) is not None:
    pytest.skip(_reason, allow_module_level=True)

OWNER = """
import asyncio, os, sys
from pathlib import Path
from cua_rl.desktop.providers.factory import make_provider
from cua_rl.desktop.providers.local.config import LocalProviderConfig

async def main():
    provider = make_provider(LocalProviderConfig(state_dir=Path(sys.argv[1])),
                             owner_pid=os.getpid())
    await provider.start("owned")
    print("up", flush=True)
    await asyncio.sleep(600)

asyncio.run(main())
"""


def _vm(state_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CUA_RL_STATE_DIR": str(state_dir)}
    return subprocess.run(
        [sys.executable, "-m", "cua_rl.cli", "vm", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _listed(state_dir: Path) -> dict[str, dict]:
    done = _vm(state_dir, "list", "--json")
    assert done.returncode == 0, done.stderr
    return {row["id"]: row for row in json.loads(done.stdout)}


def test_stale_desktops_are_shown_and_cleaned(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(state_dir)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert owner.stdout is not None and owner.stdout.readline().strip() == "up"
        (state_dir / "half-started").mkdir()  # a start that died before its record
        os.utime(state_dir / "half-started", (0, 0))
        rows = _listed(state_dir)
        assert rows["owned"]["owner_pid"] == owner.pid and rows["owned"]["stale"] == ""
        assert rows["half-started"]["stale"] == "a start that never finished"
        kept = _vm(state_dir, "down", "--all")
        assert kept.returncode == 0, kept.stderr
        assert "kept owned: owned by the live run" in kept.stderr
        assert _listed(state_dir)["owned"]["alive"] is True
        owner.kill()  # SIGKILL: the run's own cleanup never runs
        owner.wait(10)
        end = time.monotonic() + 30
        while not (rows := _listed(state_dir))["owned"]["stale"]:
            assert time.monotonic() < end, rows
            time.sleep(0.2)
        assert "is gone" in rows["owned"]["stale"]
        cleaned = _vm(state_dir, "down", "--stale")
        assert cleaned.returncode == 0, cleaned.stderr
        assert set(cleaned.stdout.split()) >= {"owned", "half-started"}
        assert _listed(state_dir) == {}
        assert not (state_dir / "owned").exists() and (state_dir / "home-template").is_dir()
    finally:
        owner.kill()
        owner.wait()
        _vm(state_dir, "down", "--all", "--force")


def test_force_stops_a_desktop_of_a_live_run(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(state_dir)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert owner.stdout is not None and owner.stdout.readline().strip() == "up"
        record = st.DesktopRecord.load(state_dir / "owned")
        assert record is not None
        forced = _vm(state_dir, "down", "--all", "--force")
        assert forced.returncode == 0 and "stopped owned" in forced.stdout
        assert _listed(state_dir) == {}
    finally:
        owner.kill()
        owner.wait()
