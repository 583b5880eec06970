"""The shared provider core (providers/core.py, records.py, owner_watch.py) and
check_provider's report, without desktops: readiness that fails as soon as the
watched desktop dies, ports never handed out twice, records that name a live
process, a watcher that takes a desktop's process group with its owner, and one
line per failed check."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from cua_rl.desktop.conformance import ProviderCheckFailed, ProviderReport
from cua_rl.desktop.conformance.leftovers import marked
from cua_rl.desktop.providers import owner_watch
from cua_rl.desktop.providers.core import PortBook, poll_until, wait_watching
from cua_rl.desktop.providers.local.session import process_start_time
from cua_rl.desktop.providers.records import JsonRecord, load_all
from cua_rl.errors import DesktopError


async def test_a_dead_desktop_fails_the_wait_at_once_not_at_the_deadline() -> None:
    never = asyncio.get_running_loop().create_future()

    async def watch() -> None:
        raise DesktopError("launcher exited with 1")

    began = time.monotonic()
    with pytest.raises(DesktopError, match="launcher exited with 1"):
        await wait_watching(never, watch, 0.01)
    assert time.monotonic() - began < 2 and never.cancelled()


async def test_polling_ends_at_its_deadline_naming_what() -> None:
    calls = []

    async def step() -> bool:
        calls.append(1)
        return False

    with pytest.raises(DesktopError, match="root volume task t-1 not done within 0 s"):
        await poll_until(
            "root volume task t-1",
            step,
            deadline=time.monotonic() + 0.05,
            interval_s=0.01,
            limit_s=0.05,
        )
    assert 2 <= len(calls) < 50


def test_a_held_port_is_not_handed_out_again() -> None:
    book = PortBook()
    assert book.claim([41000, 41000, 41001], lambda p: p, "test") == 41000
    assert book.claim([41000, 41001], lambda p: p, "test") == 41001
    with pytest.raises(DesktopError, match="test: no free TCP port"):
        book.claim([41000, 41001], lambda p: p, "test")
    book.release(41000, None)
    assert book.claim([41000], lambda p: p, "test") == 41000


@dataclass(slots=True)
class _Record(JsonRecord):
    id: str
    pid: int
    start_time: float


def test_records_round_trip_and_know_whether_their_process_runs(tmp_path: Path) -> None:
    me = _Record("me", os.getpid(), process_start_time(os.getpid()) or 0.0)
    (tmp_path / "me").mkdir()
    me.save(tmp_path / "me")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "state.json").write_text("{not json")
    assert load_all(tmp_path, _Record) == [me] and me.alive
    assert not _Record("reused", os.getpid(), 1.0).alive  # a reused pid is not it


def test_the_watcher_takes_the_group_with_its_owner_and_then_exits() -> None:
    owner = subprocess.Popen(["sleep", "60"])
    group = subprocess.Popen(["sh", "-c", "sleep 60 & sleep 60"], start_new_session=True)
    watcher = owner_watch.spawn(owner.pid, group.pid)
    try:
        owner.kill()
        owner.wait(10)
        group.wait(10)  # killed by the watcher (the wait raises on a deadline)
        assert watcher.wait(10) == 0
    finally:
        for proc in (owner, group, watcher):
            proc.kill()
            proc.wait()


def test_the_watcher_exits_by_itself_once_the_group_is_gone() -> None:
    group = subprocess.Popen(["sleep", "60"], start_new_session=True)
    watcher = owner_watch.spawn(os.getpid(), group.pid)
    try:
        group.kill()
        group.wait(10)
        assert watcher.wait(10) == 0
    finally:
        watcher.kill()
        watcher.wait()


def test_marked_finds_a_process_by_its_environment_only() -> None:
    env = {**os.environ, "CUA_RL_CHECK_MARK": "m-unit"}
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env)
    try:
        deadline = time.monotonic() + 10
        while child.pid not in marked("CUA_RL_CHECK_MARK", "m-unit"):
            assert time.monotonic() < deadline, "marked process not found"
            time.sleep(0.01)
        assert os.getpid() not in marked("CUA_RL_CHECK_MARK", "m-unit")
    finally:
        child.kill()
        child.wait()
    assert marked("CUA_RL_CHECK_MARK", "m-unit") == []


def test_the_report_has_one_line_per_failure() -> None:
    report = ProviderReport("mine", passed=["start"])
    report.fail("auth", "GET /platform without a token\nanswered 200")
    report.notes.append("cleanup: not bound to an owner")
    assert not report.ok and report.failed("auth") and not report.failed("start")
    assert str(report).splitlines() == [
        "provider 'mine': 1 check(s) failed",
        "auth: GET /platform without a token answered 200",
        "note: cleanup: not bound to an owner",
    ]
    with pytest.raises(ProviderCheckFailed, match="auth: GET /platform"):
        report.raise_if_failed()
