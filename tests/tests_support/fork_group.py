"""A group of rollouts started from one setup (`fleet.fork_groups`) on running
desktops, beside a fresh setup of the same task: what the qemu fork test checks
(it runs on the escape suite's two VMs, whose boot it shares)."""

from __future__ import annotations

import asyncio
import io
import time
from dataclasses import dataclass, field
from pathlib import Path

from cua_rl.desktop.file_cache import FileCache
from cua_rl.desktop.pool import DesktopPool
from cua_rl.desktop.providers.base import DesktopHandle, DesktopProvider
from cua_rl.rollout.config import EpisodeConfig
from cua_rl.rollout.guest_desktop import PoolDesktops
from cua_rl.rollout.scheduler import RolloutTicket
from cua_rl.tasks.sources import DATA_ROOT, load_task_set
from cua_rl.types import Action, TaskVariant

CLICK_TARGET = "3f721143-4ecd-5578-b3c7-538ff7573b16"
"""The local suite's click target: a file written, a Tk app launched, a wait for its
window (a multi-step setup that runs on the minimal image); a click on its right
half scores 1, no click 0."""


def click_target() -> TaskVariant:
    (variants,) = load_task_set("local", None, [CLICK_TARGET], DATA_ROOT)
    return variants[0]


@dataclass
class GroupRun:
    fresh_shot: bytes = b""
    fresh_score: float = -1.0
    fresh_setup_s: float = 0.0
    shots: dict[int, bytes] = field(default_factory=dict)
    scores: dict[int, float] = field(default_factory=dict)
    group_s: float = 0.0
    counts: dict[str, int] = field(default_factory=dict)
    forks_left: list[str] = field(default_factory=list)


async def run_fork_group(
    provider: DesktopProvider,
    handles: list[DesktopHandle],
    work: Path,
    rollouts: int = 4,
    clicked: int = 3,
) -> GroupRun:
    """On `handles` (adopted into a pool): one fresh setup of the click target and
    its no-op score; then a group of `rollouts` forked from one setup, each one's
    first screenshot and score (rollout `clicked` clicks the target first). Every
    desktop is reset to its own state at the end."""
    variant = click_target()
    pool = DesktopPool(provider, len(handles), health_interval_s=3600)
    await pool.start(adopt=handles)
    desktops = PoolDesktops(
        pool,
        cache=FileCache(work / "cache"),
        work_root=work / "work",
        cfg=EpisodeConfig(settle_max_s=20.0, screenshot_format="png"),
        forks=True,
    )
    out = GroupRun()
    try:
        async with desktops.lease() as desktop:  # no ticket: a plain setup
            began = time.monotonic()
            await desktop.prepare(variant)
            out.fresh_setup_s = time.monotonic() - began
            out.fresh_shot = await desktop.screenshot()
            out.fresh_score = await desktop.evaluate(variant, None)

        async def rollout(slot: int) -> None:
            ticket = RolloutTicket("g-fork", variant, slot)
            async with desktops.lease(ticket) as desktop:
                await desktop.prepare(variant)
                out.shots[slot] = await desktop.screenshot()
                if slot == clicked:
                    await desktop.act("pyautogui.click(1700, 540)")
                    await asyncio.sleep(1.0)  # Tk writes the press to its log
                last = Action(kind="terminate", status="success") if slot == clicked else None
                out.scores[slot] = await desktop.evaluate(variant, last)

        began = time.monotonic()
        async with desktops.ahead(_NoScheduler()):  # type: ignore[arg-type]
            await asyncio.gather(*(rollout(k) for k in range(rollouts)))
            desktops.group_done("g-fork")
        out.group_s = time.monotonic() - began
        out.counts = desktops.figures()
        forks = getattr(provider, "state_dir", work) / "forks"
        out.forks_left = sorted(p.name for p in forks.iterdir()) if forks.is_dir() else []
        leased = [await pool.acquire() for _ in handles]  # home again: they are the caller's
        for one in leased:
            await pool.reset(one.handle)
            pool.release(one.handle, True)
    finally:
        await pool.close(stop=False)  # the desktops are the caller's
    return out


class _NoScheduler:
    """`PoolDesktops.ahead` without spares reads nothing of the scheduler."""

    group_size = 1

    def upcoming(self, limit: int) -> list[object]:
        return []


def pixel_difference(a: bytes, b: bytes) -> tuple[float, float]:
    """(mean absolute difference of the RGB values, share of pixels that differ)."""
    from PIL import Image, ImageChops, ImageStat

    with Image.open(io.BytesIO(a)) as one, Image.open(io.BytesIO(b)) as two:
        diff = ImageChops.difference(one.convert("RGB"), two.convert("RGB"))
    mean = sum(ImageStat.Stat(diff).mean) / 3
    changed = sum(1 for px in diff.convert("L").getdata() if px)
    return mean, changed / (diff.width * diff.height)
