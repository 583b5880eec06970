"""Spare desktops on real local desktops: a desktop set up ahead for the scheduler's
next ticket is handed to that ticket's actor set up (its files there, its work dir
with it), and the episode's own wait for setup is nothing."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from cua_rl.desktop.file_cache import FileCache
from cua_rl.desktop.pool import DesktopPool
from cua_rl.desktop.providers.local.config import LocalProviderConfig
from cua_rl.desktop.providers.local.provider import LocalProvider
from cua_rl.rollout.config import EpisodeConfig
from cua_rl.rollout.guest_desktop import PoolDesktops
from cua_rl.rollout.scheduler import GroupScheduler
from cua_rl.runtime.local import task_cycle
from cua_rl.tasks.sources import DATA_ROOT, load_task_set

pytestmark = pytest.mark.desktop

MOVE_TXT = "48e34106-14b8-569b-87fd-ddb8b69036bc"
"""The quickstart's first task: its setup writes five files into ~/Downloads."""


async def test_a_spare_comes_set_up_for_its_ticket(tmp_path: Path, local_desktops: None) -> None:
    (variants,) = load_task_set("local", None, [MOVE_TXT], DATA_ROOT)
    variant = variants[0]
    provider = LocalProvider(LocalProviderConfig(state_dir=tmp_path / "state"))
    pool = DesktopPool(provider, 2, id_prefix="spare", health_interval_s=3600)
    await pool.start()
    desktops = PoolDesktops(
        pool,
        cache=FileCache(tmp_path / "cache"),
        work_root=tmp_path / "work",
        cfg=EpisodeConfig(settle_max_s=2.0),
        spares=1,
    )
    scheduler = GroupScheduler(task_cycle([variant], 1), 2)
    try:
        async with desktops.ahead(scheduler):
            assert desktops.spares is not None
            deadline = time.monotonic() + 60
            while not desktops.spares._ready:  # set up for the forecast group's first rollout
                assert time.monotonic() < deadline, desktops.figures()
                await asyncio.sleep(0.1)
            ticket = await scheduler.next_ticket()
            assert ticket is not None
            async with desktops.lease(ticket) as desktop:
                began = time.monotonic()
                await desktop.prepare(variant)
                waited = time.monotonic() - began
                files = await desktop.client.get_file("/home/user/Downloads/todo.txt")
                assert desktop.work_dir is not None and desktop.work_dir.is_dir()
                score = await desktop.evaluate(variant, None)
            counts = desktops.figures()
    finally:
        await pool.close()
        await provider.close()
    assert files == b"milk\n" and score == 0.0
    assert waited < 0.5, waited  # nothing left to do: the spare was set up
    assert counts["spare_hits"] == 1 and counts["spare_prepared"] >= 1, counts
