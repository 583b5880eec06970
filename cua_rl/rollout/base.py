"""What an episode needs from a desktop, as a small protocol.

The actor and the fleet depend only on it (and on `inference.base.ChatBackend` for
the model), so the same code runs against real desktops and model servers and
against the simulated ones of `cua-rl bench fleet`.
"""

from __future__ import annotations

from typing import Protocol

from cua_rl.types import Action, TaskVariant


class EpisodeDesktop(Protocol):
    """One leased desktop, seen by one episode."""

    screen: tuple[int, int]

    async def prepare(self, variant: TaskVariant) -> None:
        """Run the task's setup steps on a freshly reset desktop."""

    async def screenshot(self) -> bytes: ...

    async def act(self, code: str) -> None:
        """Run pyautogui code; raise GuestError if the desktop is gone."""

    async def evaluate(self, variant: TaskVariant, last_action: Action | None) -> float: ...
