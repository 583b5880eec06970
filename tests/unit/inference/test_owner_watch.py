"""The owner watch fires when the owning process exits, and only then."""

from __future__ import annotations

import asyncio
import os
import sys

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


@pytest.mark.parametrize(("value", "expected"), [("", None), ("abc", None), ("1", None),
                                                  ("-5", None), ("4242", 4242)])
def test_owner_pid_reads_the_environment(monkeypatch: pytest.MonkeyPatch, value: str,
                                         expected: int | None) -> None:
    monkeypatch.setenv(owner_watch.OWNER_ENV, value)
    assert owner_watch.owner_pid() == expected


def test_owner_env_names_this_process() -> None:
    assert owner_watch.owner_env() == {owner_watch.OWNER_ENV: str(os.getpid())}
