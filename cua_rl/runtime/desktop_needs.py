"""What a run's desktops need of the machines, per provider: vCPUs, memory, disk, and
how a reset is done (the placement plan and the dry run print it).

From the provider's config alone, as the provider applies it; the cloud sizes come
from a small table of instance types (`AWS_SIZES`, public EC2 sizes), since no API is
asked. A resource a provider does not bound is said so, not guessed.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from cua_rl.config import RunConfig

AWS_SIZES: dict[str, tuple[int, float]] = {
    "t3.medium": (2, 4.0),
    "t3.large": (2, 8.0),
    "t3.xlarge": (4, 16.0),
    "t3.2xlarge": (8, 32.0),
    "m5.large": (2, 8.0),
    "m5.xlarge": (4, 16.0),
    "m5.2xlarge": (8, 32.0),
    "m5.4xlarge": (16, 64.0),
    "c5.2xlarge": (8, 16.0),
    "c5.4xlarge": (16, 32.0),
    "m6i.2xlarge": (8, 32.0),
    "m6i.4xlarge": (16, 64.0),
}
"""EC2 instance type -> (vCPUs, GiB)."""


@dataclass(frozen=True)
class DesktopNeeds:
    provider: str
    count: int
    vcpus: float | None
    """Per desktop; None: not capped (it shares the host's CPUs)."""
    memory_gib: float
    """Per desktop (a local desktop's tmpfs files count in it)."""
    disk_gib: float | None
    """Per desktop on the host's disk; None: none of its own (tmpfs or the image)."""
    reset: str
    """How a reset is done, and roughly what it costs."""

    @property
    def total_vcpus(self) -> float | None:
        return None if self.vcpus is None else self.vcpus * self.count

    @property
    def total_memory_gib(self) -> float:
        return self.memory_gib * self.count

    def as_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "total_vcpus": self.total_vcpus,
            "total_memory_gib": self.total_memory_gib,
        }


def _gib(size: str) -> float:
    """`4G`, `512M`, `2g`, `2048m` -> GiB."""
    match = re.fullmatch(r"(\d+)([kKmMgG])", size)
    if match is None:
        return 0.0
    value, unit = int(match[1]), match[2].lower()
    return value / {"k": 1024**2, "m": 1024, "g": 1}[unit]


def desktop_needs(cfg: RunConfig) -> DesktopNeeds:
    provider, count = cfg.desktops.provider, cfg.desktops.count
    kind = provider.type
    if kind == "local":
        return DesktopNeeds(
            kind,
            count,
            None,
            provider.limits.memory_mb / 1024,
            None,
            "a new bubblewrap sandbox (Xvfb, window manager, guest: seconds)",
        )
    if kind == "container":
        return DesktopNeeds(
            kind,
            count,
            provider.cpus,
            provider.limits.memory_mb / 1024,
            None,
            "a new container from the image (seconds)",
        )
    if kind == "docker":
        return DesktopNeeds(
            kind,
            count,
            provider.cpus,
            _gib(provider.ram),
            _gib(provider.disk_size),
            "a new container: the VM boots again from the read-only qcow2 "
            "(30-90 s with KVM, minutes without)",
        )
    if kind == "qemu":
        reset = (
            "loadvm of the snapshot saved at first boot (seconds)"
            if provider.snapshot_reset
            else "a fresh overlay and a boot (30-90 s with KVM)"
        )
        return DesktopNeeds(kind, count, provider.cpus, provider.memory_mb / 1024, None, reset)
    if kind == "aws":
        if provider.image_kind == "fleet-host":
            per = provider.desktops_per_instance
            return DesktopNeeds(
                kind,
                count,
                provider.fleet_cpus,
                _gib(provider.fleet_memory),
                None,
                f"a new container on its fleet host ({per} desktops "
                f"per {provider.instance_type} instance: seconds)",
            )
        vcpus, memory = AWS_SIZES.get(provider.instance_type, (None, 0.0))
        return DesktopNeeds(
            kind, count, vcpus, memory, None, f"a new {provider.instance_type} instance (minutes)"
        )
    raise ValueError(f"desktops.provider.type {kind!r}: no resource description")
