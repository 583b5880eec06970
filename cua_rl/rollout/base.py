"""What an episode needs from the outside world, as small protocols.

The actor, the fleet and the judge depend only on these, so the same code runs
against real desktops and model servers and against the simulated ones of
`cua-rl bench fleet`.
"""

from __future__ import annotations

from typing import Any, Protocol

from cua_rl.inference.base import ChatResult
from cua_rl.types import Action, TaskVariant


class ChatBackend(Protocol):
    """A pool of model replicas (InferencePool has this shape)."""

    async def chat(
        self, messages: list[dict[str, Any]], *, session_key: str | None = None, **kwargs: Any
    ) -> ChatResult: ...

    def end_session(self, session_key: str) -> None: ...


class EpisodeDesktop(Protocol):
    """One leased desktop, seen by one episode."""

    screen: tuple[int, int]

    async def prepare(self, variant: TaskVariant) -> None:
        """Run the task's setup steps on a freshly reset desktop."""

    async def screenshot(self) -> bytes: ...

    async def act(self, code: str) -> None:
        """Run pyautogui code; raise GuestError if the desktop is gone."""

    async def evaluate(self, variant: TaskVariant, last_action: Action | None) -> float: ...
