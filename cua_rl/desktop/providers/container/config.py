"""Config of the `container` provider (kept apart from the provider so that
config loading never imports subprocess code)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from cua_rl.desktop.providers.local.config import DesktopLimits


def default_container_state_dir() -> Path:
    """`$CUA_RL_STATE_DIR/container`, else `~/.cache/cua-rl/container`."""
    env = os.environ.get("CUA_RL_STATE_DIR")
    return (Path(env) if env else Path.home() / ".cache" / "cua-rl") / "container"


class ContainerProviderConfig(BaseModel):
    """Desktops as containers of a `cua-rl image build --format docker` image:
    one container per desktop, no network at all (`--network none`), the guest on
    a Unix socket in a bind-mounted directory that the host forwards to
    127.0.0.1; a reset is a new container from the image."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["container"] = "container"
    """Selects this provider in the `ProviderConfig` union."""
    image: str = "cua-rl-desktop:full"
    """Image to run (built by `cua-rl image build --format docker --profile full`;
    the build tags `cua-rl-desktop:<profile>` and `cua-rl-desktop:<content hash>`)."""
    engine: Literal["auto", "docker", "podman"] = "auto"
    """Container CLI: `auto` takes podman when installed, else docker."""
    state_dir: Path = Field(default_factory=default_container_state_dir)
    """Per desktop: the bind-mounted run dir (guest socket, token) and the
    forwarder's record; shared by every `cua-rl` invocation."""
    limits: DesktopLimits = Field(default_factory=DesktopLimits)
    """What one desktop may use, as for local desktops (docs/sandbox.md, "Limits"):
    `pids` is `--pids-limit`, `memory_mb` is `--memory` with `--memory-swap` equal
    (no swap; the tmpfs mounts count in it), `cpu_weight` is `--cpu-shares`
    (weight x 1024 / 100), `home_mb` and `tmp_mb` size the tmpfs mounts of the
    read-only root (home; /tmp, /var/tmp, /run). `enabled: false` drops them all
    (a writable root on the engine's overlay; for bench comparisons only)."""
    seccomp: bool = True
    """Run desktops under our seccomp profile (`container/seccomp.py`: the local
    desktops' deny list, ptrace and io_uring included, and no nested namespaces)
    instead of the engine's default; false only to compare."""
    cpus: float = Field(1.0, gt=0, le=64)
    """Hard CPU cap per desktop (`--cpus`), on top of the share `limits.cpu_weight`
    gives under contention (applied with limits on or off)."""
    shm_size: str = Field("256m", pattern=r"^\d+[kmg]$")
    """Size of /dev/shm (Chromium needs more than the engine's 64m default; a tmpfs,
    counted in `limits.memory_mb`)."""
    width: int = Field(1920, ge=320, le=7680)
    """Screen width of the desktop's X server."""
    height: int = Field(1080, ge=240, le=4320)
    """Screen height of the desktop's X server."""
    name_prefix: str = Field("cua-rl-ct-", pattern=r"^[a-zA-Z0-9][a-zA-Z0-9_.-]*$")
    """Container names are `<name_prefix><desktop id>`."""
    extra_args: list[str] = Field(default_factory=list)
    """More `run` arguments, inserted before the image (never a network option:
    the provider refuses `--network`/`--net`)."""
    ready_timeout_s: float = Field(60.0, gt=0, le=3600)
    """Deadline for the guest to answer after the container starts."""
    command_timeout_s: float = Field(60.0, gt=0)
    """Deadline of one engine CLI call."""

    @property
    def has_network(self) -> bool:
        """Whether desktops reach the internet (read by `cua-rl tasks check`): never,
        they run with `--network none`."""
        return False
