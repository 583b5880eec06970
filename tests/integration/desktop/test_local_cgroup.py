"""The desktop cgroup on this machine's real hierarchy: a child started inside it is
bound by its pids limit, and the cgroup goes away with it. The cgroup is entered by
a one-thread helper process, never by pytest itself. cgroup v1 and v2 each
run where the host has them (a host has one or the other)."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from cua_rl.desktop import attack_scripts
from cua_rl.desktop.providers.local import cgroup as local_cgroup

FOUND = local_cgroup.version()


def _needs(version: int) -> None:
    if os.geteuid() != 0:
        pytest.skip("making cgroups needs root (the local provider runs as root)")
    if FOUND != version:
        pytest.skip(
            f"this host has cgroup v{FOUND or ' none'}, not v{version}: the v{version} "
            "path runs on hosts that have it (most cloud hosts are v2)"
        )


HELPER = """
import json, os, sys
from cua_rl.desktop.providers.local.cgroup import Cgroup
cgroup = Cgroup(*json.loads(sys.argv[1]))
mine = open("/proc/self/cgroup").read()
cgroup.enter()
inside = open("/proc/self/cgroup").read()
cgroup.leave()
assert open("/proc/self/cgroup").read() == mine, "leave() did not step back out"
assert inside != mine, "enter() did not move the helper"
cgroup.enter()
os.execvp("sh", ["sh", "-c", sys.argv[2]])
"""
"""Enters the cgroup (checking that leave() steps back out on the way) and execs the
fork loop: a fresh one-thread process, so the pids limit counts only the loop's own
processes. Moving pytest itself counted every thread earlier tests had left it."""


def _fork_count(cgroup: local_cgroup.Cgroup) -> int:
    """Run the hostile fork loop (40 children at most) in the cgroup from a helper
    process; how many it got."""
    spec = json.dumps([cgroup.version, list(cgroup.dirs), list(cgroup.home)])
    proc = subprocess.run(
        [sys.executable, "-c", HELPER, spec, attack_scripts.fork_loop(max_procs=40, seconds=2)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return int(attack_scripts.report(proc.stdout, "fork_loop")["started"])


@pytest.mark.parametrize("version", [1, 2])
def test_a_desktop_cgroup_bounds_its_processes_and_is_removed(version: int) -> None:
    _needs(version)
    name = f"test-{secrets.token_hex(4)}"
    cgroup = local_cgroup.create(name, pids=16, memory_bytes=256 << 20, cpu_weight=50)
    try:
        mine = Path("/proc/self/cgroup").read_text()
        started = _fork_count(cgroup)
        assert Path("/proc/self/cgroup").read_text() == mine  # pytest never moved
        assert 0 < started < 16, started  # the shell and the forker count too
        limits = {Path(d).parent.parent.name: d for d in cgroup.dirs}
        files = [
            Path(d) / f
            for d in cgroup.dirs
            for f in ("pids.max", "memory.limit_in_bytes", "memory.max")
            if (Path(d) / f).exists()
        ]
        assert {f.read_text().strip() for f in files} == {"16", str(256 << 20)}, limits
    finally:
        cgroup.remove()
    assert not any(os.path.exists(d) for d in cgroup.dirs)
