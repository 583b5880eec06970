"""The Gymnasium ids of our environments.

`nondeterministic=True`: a real screen is never bit-identical between two resets
(clock, cursor blink, font hinting), so Gymnasium's checker must not demand equal
observations for equal seeds. No `max_episode_steps`: the environment truncates
at its own `max_steps`, because it scores the episode there (a TimeLimit wrapper
would cut it off unscored).
"""

from __future__ import annotations

import gymnasium

LOCAL_ID = "cua_rl/Local-v0"
OSWORLD_ID = "cua_rl/OSWorld-v0"


def register_envs() -> None:
    """Register both ids (idempotent)."""
    for env_id, entry in (
        (LOCAL_ID, "cua_rl.env.desktop_env:LocalEnv"),
        (OSWORLD_ID, "cua_rl.env.desktop_env:OSWorldEnv"),
    ):
        if env_id not in gymnasium.registry:
            gymnasium.register(
                env_id, entry_point=entry, nondeterministic=True, disable_env_checker=False
            )
