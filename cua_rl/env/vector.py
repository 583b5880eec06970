"""`DesktopVectorEnv`: many desktops stepped at once, for Gymnasium-style trainers.

A `gymnasium.vector.VectorEnv` of our own rather than Gymnasium's `AsyncVectorEnv`:
that one runs every copy in a subprocess, which would start a provider, an event
loop and a desktop pool per copy and pickle 6 MB screenshots through pipes. Ours
runs all copies as coroutines on the one hub loop of the process, sharing its
desktop pools: a batch of actions becomes one `asyncio.gather`, so the wall time
of a step is the slowest desktop's, not the sum. Rollouts whose episodes should
not wait for each other use `AsyncDesktopEnv` (one coroutine per episode) instead.

Autoreset follows Gymnasium's default (`NEXT_STEP`): the step after a copy's
episode ended resets that copy (its action is ignored, its reward 0). A desktop
failure fails the whole call, naming the copy.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array

from cua_rl.env.config import EnvConfig
from cua_rl.env.desktop_env import CLOSE_TIMEOUT_S
from cua_rl.env.hub import HUB, DesktopHub
from cua_rl.env.session import DesktopSession
from cua_rl.env.spaces import action_space, observation_space
from cua_rl.env.tasks import DEFAULT_LOCAL_TASK, TaskChoice, load_env_tasks
from cua_rl.types import TaskVariant


class DesktopVectorEnv(VectorEnv):
    """`num_envs` desktops over one task set, stepped concurrently."""

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": []}

    def __init__(
        self,
        num_envs: int,
        task_set: Sequence[Sequence[TaskVariant]] | None = None,
        *,
        hub: DesktopHub | None = None,
        **settings: Any,
    ) -> None:
        """`task_set`: the variants of each task (default: the local click-target
        task); `settings`: the fields of `EnvConfig`, the same for every copy."""
        if num_envs < 1:
            raise ValueError(f"num_envs: expected >= 1, got {num_envs}")
        self.num_envs = num_envs
        self.config = EnvConfig.model_validate(settings)
        self.tasks = TaskChoice(
            task_set if task_set is not None else load_env_tasks("local", DEFAULT_LOCAL_TASK, None)
        )
        self.hub = hub or HUB
        self.single_observation_space = observation_space(self.config)
        self.single_action_space = action_space()
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._sessions = [DesktopSession(self.hub, self.config) for _ in range(num_envs)]
        self._rngs = [np.random.default_rng() for _ in range(num_envs)]
        self._autoreset = np.zeros(num_envs, dtype=np.bool_)

    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Reset every copy; an int seed seeds copy i with seed + i; `options` are
        `DesktopEnv.reset`'s, for every copy."""
        options = dict(options or {})
        mask = options.pop("reset_mask", None)
        if mask is not None and not np.all(mask):
            raise ValueError(
                "reset options: a partial reset_mask is not supported (copies "
                "whose episode ended are reset by the next step)"
            )
        seeds = (
            [None if seed is None else seed + i for i in range(self.num_envs)]
            if seed is None or isinstance(seed, int)
            else list(seed)
        )
        if len(seeds) != self.num_envs:
            raise ValueError(f"reset: {len(seeds)} seeds for {self.num_envs} environments")
        for i, s in enumerate(seeds):
            if s is not None:
                self._rngs[i] = np.random.default_rng(s)
        variants = [self.tasks.pick(options, rng) for rng in self._rngs]
        done = self.hub.call(
            _gather([s.reset(v) for s, v in zip(self._sessions, variants, strict=True)]),
            self.config.reset_timeout_s,
            "vector reset",
        )
        self._autoreset[:] = False
        infos: dict[str, Any] = {}
        for i, (_, info) in enumerate(done):
            infos = self._add_info(infos, info, i)
        return self._batch([obs for obs, _ in done]), infos

    def step(
        self, actions: Sequence[str | dict[str, Any]]
    ) -> tuple[dict[str, Any], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """One action per copy; copies whose episode ended last step are reset instead."""
        if len(actions) != self.num_envs:
            raise ValueError(f"step: {len(actions)} actions for {self.num_envs} environments")
        variants = [
            self.tasks.pick(None, rng) if again else None
            for rng, again in zip(self._rngs, self._autoreset, strict=True)
        ]
        coros = [
            _as_step(session.reset(variant)) if variant is not None else session.step(action)
            for session, variant, action in zip(self._sessions, variants, actions, strict=True)
        ]
        done = self.hub.call(_gather(coros), self.config.step_timeout_s, "vector step")
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminations = np.zeros(self.num_envs, dtype=np.bool_)
        truncations = np.zeros(self.num_envs, dtype=np.bool_)
        infos: dict[str, Any] = {}
        for i, (_, reward, terminated, truncated, info) in enumerate(done):
            rewards[i], terminations[i], truncations[i] = reward, terminated, truncated
            infos = self._add_info(infos, info, i)
        self._autoreset = terminations | truncations
        return self._batch([d[0] for d in done]), rewards, terminations, truncations, infos

    def close_extras(self, **kwargs: Any) -> None:
        """Give every copy's desktop back (kept by the hub for later environments)."""
        if any(s.active for s in self._sessions):
            self.hub.call(
                _gather([s.close() for s in self._sessions]), CLOSE_TIMEOUT_S, "vector close"
            )

    def _batch(self, observations: list[dict[str, Any]]) -> dict[str, Any]:
        out = create_empty_array(self.single_observation_space, self.num_envs)
        return concatenate(self.single_observation_space, observations, out)


async def _as_step(reset: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
    obs, info = await reset
    return obs, 0.0, False, False, info


async def _gather(coros: list[Any]) -> list[Any]:
    """Run every copy's call at once; the first failure cancels the others and is
    raised with a note naming its copy (the others' desktops stay leased and usable)."""
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(_named(i, c)) for i, c in enumerate(coros)]
    except ExceptionGroup as failed:
        raise failed.exceptions[0] from None
    return [t.result() for t in tasks]


async def _named(index: int, coro: Any) -> Any:
    try:
        return await coro
    except Exception as exc:
        exc.add_note(f"in copy {index} of the vector environment")
        raise
