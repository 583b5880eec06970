"""Our desktops as Gymnasium environments (docs/gymnasium.md).

Importing this package registers `cua_rl/Local-v0` and `cua_rl/OSWorld-v0`
(Gymnasium 1.x loads no plugins: `import cua_rl.env` first, or name the module in
the id, `gymnasium.make("cua_rl.env:cua_rl/Local-v0")`). The environments, the
vector environment and the asyncio interface are imported on first use, so this
import stays cheap.
"""

from __future__ import annotations

from typing import Any

from cua_rl.env.registration import register_envs

register_envs()

_LAZY = {
    "DesktopEnv": "cua_rl.env.desktop_env",
    "LocalEnv": "cua_rl.env.desktop_env",
    "OSWorldEnv": "cua_rl.env.desktop_env",
    "DesktopVectorEnv": "cua_rl.env.vector",
    "AsyncDesktopEnv": "cua_rl.env.async_env",
    "EnvConfig": "cua_rl.env.config",
    "shutdown": "cua_rl.env.hub",
}

__all__ = [*_LAZY, "register_envs"]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'cua_rl.env' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_LAZY[name]), name)
