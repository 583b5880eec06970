"""Config of the `local` provider (kept apart from the provider so that config
loading never imports process-management code)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


def default_state_dir() -> Path:
    """`$CUA_RL_STATE_DIR`, else `~/.cache/cua-rl/desktops`: shared by every
    `cua-rl` invocation so that `vm list/down` find desktops `vm up` left."""
    env = os.environ.get("CUA_RL_STATE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "cua-rl" / "desktops"


class DesktopLimits(BaseModel):
    """What one desktop may use of the host (docs/sandbox.md, "Limits"): local
    desktops apply it with a cgroup and tmpfs sizes, container desktops with the
    engine's own options (`container.limits`).

    The defaults fit the `full` image's heaviest tasks (Chromium with a few tabs
    beside LibreOffice: ~1.5 GB, ~400 threads) with room to spare, and keep 96
    desktops from taking more than their share of a host: a fork loop, a runaway
    allocation or a disk fill stops at the desktop's own bound."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    """Off: no cgroup and no tmpfs sizes (containers: no engine limits and a
    writable root), the behaviour before issue 29; for `cua-rl bench desktops`
    comparisons only."""
    pids: int = Field(2048, ge=64, le=1 << 22)
    """Processes and threads of the whole desktop (cgroup `pids.max`): Chromium
    alone runs ~150 threads; a fork loop stops here instead of at the host's pid_max."""
    memory_mb: int = Field(4096, ge=256)
    """Memory of the whole desktop, its tmpfs files included (cgroup memory limit,
    no swap): the kernel's OOM killer then picks a process inside the desktop."""
    cpu_weight: int = Field(50, ge=1, le=10000)
    """CPU share under contention (cgroup v2 `cpu.weight`, 100 = an ordinary group;
    v1 `cpu.shares` = weight x 1024 / 100): half of an ordinary group, so the model
    servers and the learner keep their share when desktops spin. No hard cap: an
    idle host lends its CPU."""
    home_mb: int = Field(1024, ge=16)
    """Size of the desktop's /home/user (a tmpfs: RAM, counted in `memory_mb`)."""
    tmp_mb: int = Field(1024, ge=16)
    """Size of each of /tmp, /var/tmp and /run inside (tmpfs, counted in `memory_mb`)."""


class LocalProviderConfig(BaseModel):
    """Desktops on this machine: Xvfb + a window manager + our guest server, each
    in its own bubblewrap sandbox (docs/sandbox.md)."""

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
    guest_venv: Path | None = None
    """A virtual environment with `cua-guest` installed (its bin/python runs the
    guest), bound read-only into every desktop; it must hold nothing secret. None:
    `guest_venv_root`/guest-venv-<content hash>, built on first use from the
    `vm/guest` sources this process imports `cua_guest` from."""
    guest_venv_root: Path = Path("/opt/cua-rl")
    """Where the content-keyed guest venvs are built (outside any checkout and
    outside /root, so a desktop may see the venv and nothing else)."""
    network: bool = False
    """Give desktops the host's network (egress for tasks that need the internet).
    Off: each desktop has its own network namespace with only loopback, so it can
    reach nothing on the host, including model servers and other desktops. On, the
    host's loopback services are reachable from the desktop too."""
    user: str = "user"
    """Unprivileged account the session runs as (OSWorld's `user`, password
    `password`); created on first start when missing."""
    seccomp: bool = True
    """Install the desktop's seccomp filter (ptrace, pidfd_getfd, io_uring, bpf, the
    key store, mount... denied: docs/sandbox.md). Chromium then runs with its own
    sandbox off (`--no-sandbox`), as it would anyway without nested user namespaces."""
    limits: DesktopLimits = Field(default_factory=DesktopLimits)
    """Per-desktop bounds on processes, memory, CPU share and disk (cgroup v1 or v2
    plus size-capped tmpfs mounts; docs/sandbox.md)."""
    first_display: int = Field(200, ge=1, le=60000)
    """Lowest X display number tried; high numbers keep clear of :0/:1/:99 that
    other tools use. Numbers in use anywhere on the machine are skipped."""

    @field_validator("window_manager")
    @classmethod
    def _strip(cls, value: str) -> str:
        return value.strip()

    @property
    def has_network(self) -> bool:
        """Whether desktops reach the internet (read by `cua-rl tasks check`): `network`."""
        return self.network
