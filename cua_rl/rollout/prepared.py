"""What spare desktops and group forks need of an episode's desktop, and what a
group's saved setup is: a neutral module, so `guest_desktop` (which uses both) and
`spare_desktops` / `group_forks` (which work on its desktops) never import each
other."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from cua_rl.desktop.pool import DesktopPool
from cua_rl.desktop.providers.base import DesktopHandle, ForkPoint
from cua_rl.desktop.settle import Settled
from cua_rl.desktop.setup_context import SetupContext
from cua_rl.errors import DesktopError, EpisodeAborted, GuestError
from cua_rl.types import TaskVariant


@dataclass(frozen=True, slots=True)
class SavedSetup:
    """What a group's rollouts start from (`group_forks`)."""

    point: ForkPoint
    files: Path
    """The setup's host-side files (its work dir), copied into each rollout's own."""
    context: SetupContext
    screen: tuple[int, int]
    settled: Settled | None
    variant_id: str


class PreparedDesktop(Protocol):
    """A leased desktop that can be set up, saved and restored (`GuestDesktop`)."""

    pool: DesktopPool
    handle: DesktopHandle
    screen: tuple[int, int]
    settled: Settled | None
    work_dir: Path | None
    prepared_for: str | None
    """The variant id whose setup the desktop holds, untouched."""
    pending: asyncio.Task[None] | None
    """A spare's setup still running when its actor claimed it."""

    async def setup(self, variant: TaskVariant, *, reset: bool = True) -> None: ...

    async def restore(self, saved: SavedSetup) -> None: ...

    def saved_context(self) -> SetupContext | None: ...

    def discard_work(self) -> None: ...


def desktop_failed(exc: BaseException) -> bool:
    """An error that says the desktop itself is gone (its pool replaces it)."""
    cause = exc.__cause__ if isinstance(exc, EpisodeAborted) else exc
    return isinstance(cause, GuestError | DesktopError)
