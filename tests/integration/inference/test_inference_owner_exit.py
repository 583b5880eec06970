"""Replicas a run launched go away when the run is SIGKILLed (no cleanup code runs)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests_support.servers import healthy

pytestmark = pytest.mark.model

OWNER = """
import asyncio, sys
from pathlib import Path
from cua_rl.inference.config import ModelServersConfig
from cua_rl.inference.launcher import model_servers

async def main():
    cfg = ModelServersConfig(model=sys.argv[1], threads=1, replicas=2)
    async with model_servers(cfg, name="owned", log_dir=Path(sys.argv[2])) as urls:
        print(" ".join(urls), flush=True)
        await asyncio.sleep(600)

asyncio.run(main())
"""


def test_servers_exit_when_their_owner_is_killed(tiny_model_dir: Path, tmp_path: Path) -> None:
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(tiny_model_dir), str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert owner.stdout is not None
        line = owner.stdout.readline()  # the pytest timeout bounds a hung start
        urls = line.split()
        assert len(urls) == 2 and all(healthy(u) for u in urls), line
        owner.send_signal(signal.SIGKILL)
        owner.wait(10)
        end = time.monotonic() + 30
        while alive := [u for u in urls if healthy(u)]:
            assert time.monotonic() < end, f"servers outlived their run: {alive}"
            time.sleep(0.1)
    finally:
        owner.kill()
        owner.wait()
