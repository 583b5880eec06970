"""The desktops `cua-rl tasks verify --provider P` proves the goldens on, and what
they offer (the preflight's `HostCapabilities`).

- `local`: local desktops (the host's apps);
- `container`: this project's image (`--profile`, default `full`) as containers,
  built or found in the image cache (`images.build`), or a tag given with `--image`;
- `qemu`: the same image as a VM (its qcow2, kernel beside it), or a disk given with
  `--image` (OSWorld's own qcow2 too: then the tasks are checked as on OSWorld's
  image). Under TCG (no usable KVM) a VM is slow: verify a sample (`--task`).
The same goldens, setup steps, getters and metrics run on each, so a task whose
verdict differs between providers shows a difference of the desktops themselves.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cua_rl.desktop.providers.config import ProviderConfig
from cua_rl.tasks.capabilities import (
    HostCapabilities,
    capabilities_for,
    image_capabilities,
    local_capabilities,
)

VerifyProvider = Literal["local", "container", "qemu"]
VERIFY_PROVIDERS: tuple[str, ...] = ("local", "container", "qemu")
JOB_TIMEOUT_S: dict[str, float] = {"local": 240.0, "container": 240.0, "qemu": 900.0}
"""Default deadline of one job (reset, setup, golden, scoring) per provider: a VM under
TCG runs the apps several times slower."""
QEMU_MAX_CPUS = 4


@dataclass(frozen=True)
class VerifyDesktops:
    """Where `tasks verify` runs its jobs."""

    provider: str
    config: ProviderConfig
    host: HostCapabilities
    image: str
    """What the desktops run: `host` for local ones, else the image's tag or disk."""


def verify_desktops(
    provider: VerifyProvider, image: str | None = None, profile: Literal["minimal", "full"] = "full"
) -> VerifyDesktops:
    """The provider config and capabilities for `provider`; builds (or finds in the
    cache) this project's image of `profile` when `image` is not given."""
    if provider == "local":
        from cua_rl.desktop.providers.local.config import LocalProviderConfig

        return VerifyDesktops("local", LocalProviderConfig(), local_capabilities(), "host")
    from cua_rl.images.build import build_image

    if provider == "container":
        from cua_rl.desktop.providers.container.config import ContainerProviderConfig

        built = None if image else build_image(profile, "docker")
        tag = image or (built.docker_tag if built is not None else None)
        assert tag is not None
        config: ProviderConfig = ContainerProviderConfig(
            image=tag, name_prefix=f"cua-rl-verify-{os.getpid()}-"
        )
        host = (
            image_capabilities("container", profile, built.manifest.get("debian"))
            if built is not None
            else capabilities_for(config)
        )
        return VerifyDesktops("container", config, host, tag)
    from cua_rl.desktop.providers.qemu.config import QemuProviderConfig

    built = None if image else build_image(profile, "qcow2")
    disk = Path(image) if image else built.qcow2 if built is not None else None
    assert disk is not None
    config = QemuProviderConfig(image=disk, cpus=min(QEMU_MAX_CPUS, os.cpu_count() or 1))
    host = (
        image_capabilities("qemu", profile, built.manifest.get("debian"))
        if built is not None
        else capabilities_for(config)
    )
    return VerifyDesktops("qemu", config, host, str(disk))
