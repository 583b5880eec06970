"""Config of the `local` provider (kept apart from the provider so that config
loading never imports process-management code)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


def default_state_dir() -> Path:
    """`$CUA_RL_STATE_DIR`, else `~/.cache/cua-rl/desktops`: shared by every
    `cua-rl` invocation so that `vm list/down` find desktops `vm up` left."""
    env = os.environ.get("CUA_RL_STATE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "cua-rl" / "desktops"


class LocalProviderConfig(BaseModel):
    """Desktops on this machine: Xvfb + a window manager + our guest server, each
    in its own mount namespace (private /tmp, own /home/user)."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["local"] = "local"
    """Selects this provider in the `ProviderConfig` union."""
    width: int = Field(1920, ge=320, le=7680)
    """Screen width in pixels (OSWorld uses 1920x1080)."""
    height: int = Field(1080, ge=240, le=4320)
    """Screen height in pixels."""
    window_manager: str = "openbox"
    """Window manager command run in each session; empty string for none (apps
    then get no decorations and no focus handling)."""
    state_dir: Path = Field(default_factory=default_state_dir)
    """Where each desktop's state JSON, token, home and log live, and the display
    lock files; default `$CUA_RL_STATE_DIR` or `~/.cache/cua-rl/desktops`."""
    home_template: Path | None = None
    """Directory copied to /home/user on start and on every reset; None builds a
    default one (Desktop, Documents, Downloads, ...) under `state_dir` on first use."""
    ready_timeout_s: float = Field(60.0, gt=0, le=600)
    """Deadline for the guest server to answer /healthz after a (re)start."""
    guest_python: str = Field(default_factory=lambda: sys.executable)
    """Interpreter that runs `-m cua_guest`; it must have the guest's dependencies
    and must not live under /tmp or /home (hidden inside the desktop)."""
    guest_package_dir: Path | None = None
    """Directory holding the `cua_guest` package, bound into every desktop and put
    on the guest's PYTHONPATH, so the checkout may live anywhere (/tmp included);
    None: wherever this process imports `cua_guest` from (none: the guest
    interpreter's own install)."""
    user: str = "user"
    """Unprivileged account the session runs as (OSWorld's `user`, password
    `password`); created on first start when missing."""
    first_display: int = Field(200, ge=1, le=60000)
    """Lowest X display number tried; high numbers keep clear of :0/:1/:99 that
    other tools use. Numbers in use anywhere on the machine are skipped."""

    @field_validator("window_manager")
    @classmethod
    def _strip(cls, value: str) -> str:
        return value.strip()
