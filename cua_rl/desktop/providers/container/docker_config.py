"""Config of the `docker` provider (kept apart from the provider so that config
loading never imports subprocess code)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from cua_rl.desktop.providers.vm_host import DEFAULT_OSWORLD_IMAGE


class DockerProviderConfig(BaseModel):
    """OSWorld desktops as QEMU-in-docker containers: OSWorld's `happysixd/osworld-docker`
    image boots the OSWorld Ubuntu qcow2, mounted read-only, so every container
    starts from the pristine image and a reset is a new container."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["docker"] = "docker"
    """Selects this provider in the `ProviderConfig` union."""
    image: Path = DEFAULT_OSWORLD_IMAGE
    """The OSWorld Ubuntu qcow2 on this host (mounted read-only at /System.qcow2)."""
    docker_image: str = "happysixd/osworld-docker"
    """Container image that runs QEMU on /System.qcow2 (OSWorld's own)."""
    pull: Literal["missing", "always", "never"] = "missing"
    """`docker run --pull`: `never` fails fast on hosts without registry access."""
    kvm: Literal["auto", "on", "off"] = "auto"
    """`auto`: pass /dev/kvm when the host has it, else software emulation (slow,
    with a warning); `on`: require it; `off`: never use it."""
    ram: str = Field("4G", pattern=r"^\d+[MG]$")
    """Guest memory (RAM_SIZE of the image); OSWorld's default."""
    cpus: int = Field(4, ge=1, le=64)
    """Guest vCPUs (CPU_CORES of the image)."""
    disk_size: str = Field("32G", pattern=r"^\d+[MG]$")
    """Guest disk size (DISK_SIZE of the image); OSWorld's default."""
    host: str = "127.0.0.1"
    """Host address the guest (5000), VNC (8006), Chrome CDP (9222) and VLC (8080)
    ports are published on; the engine picks a free host port for each. Use
    `0.0.0.0` plus `advertise_host` when actors run on other machines."""
    advertise_host: str | None = None
    """Host name put in desktop URLs; None uses `host` (or 127.0.0.1 for 0.0.0.0)."""
    name_prefix: str = Field("cua-rl-", pattern=r"^[a-zA-Z0-9][a-zA-Z0-9_.-]*$")
    """Container names are `<name_prefix><desktop id>`."""
    extra_args: list[str] = Field(default_factory=list)
    """More `docker run` arguments (e.g. `--memory 6g`), inserted before the image."""
    ready_timeout_s: float = Field(600.0, gt=0, le=3600)
    """Deadline for the guest to answer after `docker run`; a KVM boot of the
    OSWorld image takes ~30-90 s, software emulation several minutes."""
    state_poll_s: float = Field(2.0, gt=0, le=60)
    """How often the container's state is checked while waiting, so a container
    that exits fails at once (with its logs) instead of at the deadline."""
    command_timeout_s: float = Field(120.0, gt=0)
    """Deadline of one `docker` CLI call (`run` may pull the image: see `pull`)."""
    pull_timeout_s: float = Field(3600.0, gt=0)
    """Deadline of `docker run` when it may pull the multi-GB image."""

    @property
    def has_network(self) -> bool:
        """Whether desktops reach the internet (read by `cua-rl tasks check`): yes, on
        the engine's default network, unless `extra_args` takes it away."""
        from itertools import pairwise

        return not any(
            a in ("--network=none", "--net=none") or (a in ("--network", "--net") and b == "none")
            for a, b in pairwise([*self.extra_args, ""])
        )
