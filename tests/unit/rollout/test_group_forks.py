"""GroupForks' bookkeeping with the real DesktopPool and stand-in desktops and
provider (the real fork, on qemu VMs: test_sandbox_escapes.py's group test): one
setup per group, a restore per rollout, the setter's failure sending the others to
set up themselves, the fork point deleted when the group is done."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from cua_rl.desktop.pool import DesktopPool
from cua_rl.desktop.providers.base import DesktopHandle, DesktopProvider, ForkPoint
from cua_rl.desktop.setup_context import SetupContext
from cua_rl.errors import DesktopError
from cua_rl.rollout.group_forks import GroupForks
from cua_rl.rollout.prepared import SavedSetup
from cua_rl.types import TaskVariant


class Forking(DesktopProvider):
    type = "memory"

    def __init__(self, fail_save: bool = False) -> None:
        self.fail_save = fail_save
        self.saved: list[str] = []
        self.restored: list[tuple[str, str]] = []
        self.dropped: list[str] = []

    async def start(self, desktop_id: str) -> DesktopHandle:
        return DesktopHandle(desktop_id, "http://127.0.0.1:9", None, self.type)

    async def reset(self, handle: DesktopHandle) -> DesktopHandle:
        return handle

    async def stop(self, handle: DesktopHandle) -> None:
        return None

    async def health(self, handle: DesktopHandle) -> bool:
        return True

    def fork_support(self) -> str | None:
        return None

    async def save_fork(self, handle: DesktopHandle, name: str) -> ForkPoint:
        await asyncio.sleep(0.01)
        if self.fail_save:
            raise DesktopError("cannot save")
        self.saved.append(name)
        return ForkPoint(name, self.type)

    async def restore_fork(self, handle: DesktopHandle, point: ForkPoint) -> DesktopHandle:
        self.restored.append((handle.id, point.name))
        return handle

    async def drop_fork(self, point: ForkPoint) -> None:
        self.dropped.append(point.name)


class Desktop:
    """Sets up by sleeping; restores through the pool like GuestDesktop."""

    def __init__(self, pool: DesktopPool, handle: DesktopHandle, work: Path) -> None:
        self.pool, self.handle, self.screen, self.settled = pool, handle, (8, 8), None
        self.work_dir: Path | None = None
        self.prepared_for: str | None = None
        self.pending = None
        self.setups = 0
        self.restored_from: str | None = None
        self._work = work

    async def setup(self, variant: TaskVariant, *, reset: bool = True) -> None:
        await asyncio.sleep(0.02)
        self.setups += 1
        self.work_dir = self._work / f"{self.handle.id}-{self.setups}"
        self.work_dir.mkdir(parents=True)
        (self.work_dir / "out.txt").write_text("written by the setup")
        self.prepared_for = variant.variant_id

    async def restore(self, saved: SavedSetup) -> None:
        await self.pool.restore_fork(self.handle, saved.point)
        self.restored_from = saved.point.name
        self.work_dir = self._work / f"{self.handle.id}-restored"
        self.work_dir.mkdir(parents=True, exist_ok=True)
        (self.work_dir / "out.txt").write_text((saved.files / "out.txt").read_text())
        self.prepared_for = saved.variant_id

    def saved_context(self) -> SetupContext:
        return SetupContext(8, 8)

    def discard_work(self) -> None:
        self.work_dir = None


VARIANT = TaskVariant(
    task_id="t",
    domain="os",
    evaluator_name="e",
    instruction="x",
    config=({"type": "execute", "parameters": {"command": "true"}},),
    evaluator={"func": "infeasible"},
)


async def group(
    tmp_path: Path, provider: Forking, rollouts: int = 3
) -> tuple[GroupForks, list[Desktop], list[BaseException | None]]:
    pool = DesktopPool(provider, rollouts, id_prefix="f", health_interval_s=3600)
    await pool.start()
    forks = GroupForks(pool, tmp_path / "forks")
    desktops = [
        Desktop(pool, (await pool.acquire()).handle, tmp_path / "work") for _ in range(rollouts)
    ]
    errors = await asyncio.gather(
        *(forks.start(d, "g1", VARIANT) for d in desktops), return_exceptions=True
    )
    return forks, desktops, [e if isinstance(e, BaseException) else None for e in errors]


async def test_one_setup_then_a_restore_for_every_rollout(tmp_path: Path) -> None:
    provider = Forking()
    forks, desktops, errors = await group(tmp_path, provider)
    assert errors == [None] * 3
    assert sum(d.setups for d in desktops) == 1 and len(provider.saved) == 1
    assert sorted(provider.restored) == sorted((d.handle.id, provider.saved[0]) for d in desktops)
    for desktop in desktops:  # the setup's host-side files reach every rollout
        assert desktop.work_dir is not None
        assert (desktop.work_dir / "out.txt").read_text() == "written by the setup"
    assert forks.counts == {"fork_saved": 1, "fork_restored": 3}
    forks.done("g1")
    await forks.close()
    assert provider.dropped == provider.saved and not list((tmp_path / "forks").iterdir())


async def test_a_failed_save_sends_the_group_to_set_up_per_rollout(tmp_path: Path) -> None:
    provider = Forking(fail_save=True)
    forks, desktops, errors = await group(tmp_path, provider)
    assert [type(e) for e in errors].count(DesktopError) == 1  # the setter's episode
    assert [d.setups for d in desktops if d.restored_from is None] == [1, 1, 1]
    assert forks.counts["fork_fallbacks"] == 1 and provider.restored == []


def test_a_task_whose_setup_reads_the_clock_does_not_fork(tmp_path: Path) -> None:
    pool = DesktopPool(Forking(), 1)
    forks = GroupForks(pool, tmp_path)
    clock = dataclasses.replace(
        VARIANT,
        task_id="c",
        config=({"type": "execute", "parameters": {"command": "date > ~/now"}},),
    )
    assert forks.applies(VARIANT) and not forks.applies(clock)
    assert "reads the clock" in str(forks.reason(clock))
