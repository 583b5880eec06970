"""The asyncio interface: `await env.reset()`, `await env.step(action)` from any loop.

For agent frameworks whose rollout loop is asyncio (verl's and SkyRL's agent loops,
AReaL's workflows, OpenAI-client agents): each episode is its own coroutine and
they do not step in lockstep, so many desktops run at once without a vector
wrapper. The work runs on the hub's loop (where the desktops live); awaiting it
never blocks the caller's loop, and cancelling the caller cancels the work.
Same tasks, settings, observations, rewards and `info` as `DesktopEnv`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from cua_rl.env.config import EnvConfig
from cua_rl.env.desktop_env import CLOSE_TIMEOUT_S
from cua_rl.env.hub import HUB, DesktopHub
from cua_rl.env.session import DesktopSession, Observation
from cua_rl.env.tasks import TaskChoice
from cua_rl.types import TaskVariant


class AsyncDesktopEnv:
    """One desktop, asyncio API; `async with` closes it."""

    def __init__(
        self,
        task_set: Sequence[Sequence[TaskVariant]],
        *,
        hub: DesktopHub | None = None,
        **settings: Any,
    ) -> None:
        self.config = EnvConfig.model_validate(settings)
        self.tasks = TaskChoice(task_set)
        self.hub = hub or HUB
        self.np_random = np.random.default_rng()
        self._session = DesktopSession(self.hub, self.config)

    async def __aenter__(self) -> AsyncDesktopEnv:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        if seed is not None:
            self.np_random = np.random.default_rng(seed)
        variant = self.tasks.pick(options, self.np_random)
        return await self.hub.acall(
            self._session.reset(variant),
            self.config.reset_timeout_s,
            f"reset to {variant.variant_id}",
        )

    async def step(
        self, action: str | dict[str, Any]
    ) -> tuple[Observation, float, bool, bool, dict[str, Any]]:
        return await self.hub.acall(self._session.step(action), self.config.step_timeout_s, "step")

    async def close(self) -> None:
        if self._session.active:
            await self.hub.acall(self._session.close(), CLOSE_TIMEOUT_S, "close")
