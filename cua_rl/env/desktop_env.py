"""`gymnasium.Env` over one desktop of any provider (docs/gymnasium.md).

`DesktopEnv` runs any task set; `LocalEnv` (`cua_rl/Local-v0`) the project's local
suite, with a default task so that it makes with no arguments; `OSWorldEnv`
(`cua_rl/OSWorld-v0`) tasks of an OSWorld checkout. The work happens in a
`DesktopSession` on the process's `DesktopHub` loop; every call waits for it with
the deadline its config names, so a hung desktop never hangs the caller.

The desktop is leased on the first `reset` (constructing an environment starts
nothing, so `gymnasium.make` is cheap) and given back on `close()`; the hub keeps
it for the next environment of the process (`cua_rl.env.shutdown()` stops them).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from cua_rl.env.config import EnvConfig
from cua_rl.env.hub import HUB, DesktopHub
from cua_rl.env.session import DesktopSession, Observation
from cua_rl.env.spaces import action_space, observation_space
from cua_rl.env.tasks import DEFAULT_LOCAL_TASK, TaskChoice, load_env_tasks
from cua_rl.errors import ConfigError
from cua_rl.types import TaskVariant

CLOSE_TIMEOUT_S = 60.0


class DesktopEnv(gym.Env[Observation, str]):
    """One desktop, one episode at a time, over a set of tasks."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 1}

    def __init__(
        self,
        task_set: Sequence[Sequence[TaskVariant]],
        *,
        render_mode: str | None = None,
        hub: DesktopHub | None = None,
        **settings: Any,
    ) -> None:
        """`task_set`: the variants of each task (its own first); `settings`: the
        fields of `EnvConfig` (provider, max_steps, coords, judge_urls, ...)."""
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode: expected one of {self.metadata['render_modes']} "
                f"or None, got {render_mode!r}"
            )
        self.config = EnvConfig.model_validate(settings)
        self.render_mode = render_mode
        self.tasks = TaskChoice(task_set)
        self.hub = hub or HUB
        self.observation_space = observation_space(self.config)
        self.action_space = action_space()
        self._session = DesktopSession(self.hub, self.config)
        self._frame: np.ndarray | None = None

    @property
    def task(self) -> TaskVariant | None:
        """The task variant of the running episode (None before a reset)."""
        return self._session.variant

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        """Reset the desktop and run the task's setup (see `TaskChoice` for `options`)."""
        super().reset(seed=seed)
        variant = self.tasks.pick(options, self.np_random)
        obs, info = self.hub.call(
            self._session.reset(variant),
            self.config.reset_timeout_s,
            f"reset to {variant.variant_id}",
        )
        self._frame = obs["screenshot"]
        return obs, info

    def step(
        self, action: str | dict[str, Any]
    ) -> tuple[Observation, float, bool, bool, dict[str, Any]]:
        """Run one action (a `computer_use` call dict, pyautogui code, WAIT/DONE/FAIL)."""
        obs, reward, terminated, truncated, info = self.hub.call(
            self._session.step(action), self.config.step_timeout_s, "step"
        )
        self._frame = obs["screenshot"]
        return obs, reward, terminated, truncated, info

    def render(self) -> np.ndarray | None:
        """The latest screenshot (`rgb_array`), None before the first reset."""
        return self._frame if self.render_mode == "rgb_array" else None

    def close(self) -> None:
        """Give the desktop back and return at once: the desktop is not stopped. The
        process keeps it running, idle and as the episode left it, for the next
        environment with the same provider settings, whose reset resets it (its pool
        still checks its health and replaces it if it dies); only the episode's work
        folder is removed. `cua_rl.env.shutdown()` stops every desktop kept, and so
        does the interpreter's exit."""
        if self._session.active:
            self.hub.call(self._session.close(), CLOSE_TIMEOUT_S, "close")
        self._frame = None


class LocalEnv(DesktopEnv):
    """`cua_rl/Local-v0`: the project's local task suite (cua_rl/tasks/data/local/)."""

    def __init__(
        self,
        render_mode: str | None = None,
        *,
        task_id: str | Sequence[str] | None = DEFAULT_LOCAL_TASK,
        split: str | None = None,
        hub: DesktopHub | None = None,
        **settings: Any,
    ) -> None:
        """`task_id`: one id or several (default: the click-target task); None with
        `split` (a split name or file) or alone: the whole suite."""
        super().__init__(
            load_env_tasks("local", task_id, split), render_mode=render_mode, hub=hub, **settings
        )


class OSWorldEnv(DesktopEnv):
    """`cua_rl/OSWorld-v0`: tasks of an OSWorld checkout (`osworld=PATH`)."""

    def __init__(
        self,
        render_mode: str | None = None,
        *,
        osworld: str | Path | None = None,
        task_id: str | Sequence[str] | None = None,
        split: str | None = None,
        hub: DesktopHub | None = None,
        **settings: Any,
    ) -> None:
        """`osworld`: the checkout (or its evaluation_examples); `task_id`: one id or
        several; `split`: a split name of ours or of the checkout (`test_small`, ...)."""
        if osworld is None:
            raise ConfigError(
                "cua_rl/OSWorld-v0: osworld=PATH (an OSWorld checkout) is "
                "required; cua_rl/Local-v0 runs the local suite without one"
            )
        super().__init__(
            load_env_tasks(f"osworld:{osworld}", task_id, split),
            render_mode=render_mode,
            hub=hub,
            **settings,
        )
