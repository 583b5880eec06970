"""The owner watch fires when the owning process exits, and only then."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable

import pytest

from cua_rl.inference import owner_watch


async def test_fires_when_the_owner_exits_not_before() -> None:
    owner = await asyncio.create_subprocess_exec("sleep", "60")
    fired = asyncio.Event()
    watch = asyncio.create_task(owner_watch.exit_when_owner_dies(owner.pid, fired.set))
    try:
        await asyncio.sleep(0)  # the watch is armed
        assert not fired.is_set()
        owner.kill()
        async with asyncio.timeout(10):
            await fired.wait()
        await watch
    finally:
        if owner.returncode is None:
            owner.kill()
        await owner.wait()


async def test_fires_at_once_for_an_owner_already_gone() -> None:
    owner = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
    await owner.wait()
    fired: list[bool] = []
    async with asyncio.timeout(10):
        await owner_watch.exit_when_owner_dies(owner.pid, lambda: fired.append(True))
    assert fired == [True]


@pytest.mark.parametrize(
    ("value", "expected"), [("", None), ("abc", None), ("1", None), ("-5", None), ("4242", 4242)]
)
def test_owner_pid_reads_the_environment(
    monkeypatch: pytest.MonkeyPatch, value: str, expected: int | None
) -> None:
    monkeypatch.setenv(owner_watch.OWNER_ENV, value)
    assert owner_watch.owner_pid() == expected


def test_owner_env_names_this_process() -> None:
    assert owner_watch.owner_env() == {owner_watch.OWNER_ENV: str(os.getpid())}


EXEC_OWNER = """
import os, subprocess, sys, time
from cua_rl.inference.owner_watch import owner_env
child = subprocess.Popen([sys.executable, "-c", sys.argv[1]], env={**os.environ, **owner_env()})
print(child.pid, flush=True)
time.sleep(600)
"""
EXEC_CHILD = """
import os
from cua_rl.inference.owner_watch import terminate_with_owner_across_exec
terminate_with_owner_across_exec()
os.execvp("sleep", ["sleep", "600"])
"""


def _running(pid: int) -> str | None:
    """The command of `pid` while it runs (None once it exited, zombies included)."""
    try:
        stat = open(f"/proc/{pid}/stat").read()  # noqa: SIM115 - a procfs read
        command = open(f"/proc/{pid}/cmdline", "rb").read()  # noqa: SIM115
    except FileNotFoundError:
        return None
    return None if stat.rsplit(")", 1)[1].split()[0] in "ZX" else command.decode()


def _poll(predicate: Callable[[], bool], deadline_s: float) -> None:
    deadline = time.monotonic() + deadline_s
    while not predicate():
        assert time.monotonic() < deadline, "deadline passed"
        time.sleep(0.05)


def test_a_server_that_execs_still_dies_with_its_owner() -> None:
    owner = subprocess.Popen(
        [sys.executable, "-c", EXEC_OWNER, EXEC_CHILD], stdout=subprocess.PIPE, text=True
    )
    child = 0
    try:
        assert owner.stdout is not None
        child = int(owner.stdout.readline())  # the pytest timeout bounds a hung start
        _poll(lambda: (_running(child) or "").startswith("sleep\0"), 30)  # exec'd
        owner.kill()
        _poll(lambda: _running(child) is None, 10)
    finally:
        owner.kill()
        owner.wait()
        if child and _running(child) is not None:  # failed: leave nothing behind
            os.kill(child, signal.SIGKILL)


def test_exec_binding_is_a_no_op_without_the_owner_as_parent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(owner_watch.OWNER_ENV, str(os.getpid()))  # alive, not our parent
    owner_watch.terminate_with_owner_across_exec()
    monkeypatch.delenv(owner_watch.OWNER_ENV)
    owner_watch.terminate_with_owner_across_exec()


def test_exec_binding_refuses_to_start_for_an_owner_already_gone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    monkeypatch.setenv(owner_watch.OWNER_ENV, str(gone.pid))
    with pytest.raises(SystemExit, match="exited before the server started"):
        owner_watch.terminate_with_owner_across_exec()
