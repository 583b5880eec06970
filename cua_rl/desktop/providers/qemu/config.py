"""Config of the `qemu` provider (kept apart from the provider so that config
loading never imports process-management code)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from cua_rl.desktop.providers.vm_host import DEFAULT_OSWORLD_IMAGE

# UEFI firmware locations of the Debian/Ubuntu `ovmf` and Fedora `edk2-ovmf` packages.
OVMF_CANDIDATES = (
    Path("/usr/share/ovmf/OVMF.fd"),
    Path("/usr/share/OVMF/OVMF.fd"),
    Path("/usr/share/qemu/OVMF.fd"),
    Path("/usr/share/edk2/ovmf/OVMF_CODE.fd"),
)


def default_qemu_state_dir() -> Path:
    """`$CUA_RL_STATE_DIR/qemu`, else `~/.cache/cua-rl/qemu` (apart from the local
    provider's records, so neither lists the other's desktops)."""
    env = os.environ.get("CUA_RL_STATE_DIR")
    return (Path(env) if env else Path.home() / ".cache" / "cua-rl") / "qemu"


def default_firmware() -> Path | None:
    """The first OVMF image installed, or None (then QEMU's default SeaBIOS boots)."""
    return next((p for p in OVMF_CANDIDATES if p.is_file()), None)


class QemuProviderConfig(BaseModel):
    """OSWorld desktops as `qemu-system-x86_64` processes on this host, each on
    its own copy-on-write overlay of the read-only OSWorld qcow2."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["qemu"] = "qemu"
    """Selects this provider in the `ProviderConfig` union."""
    image: Path = DEFAULT_OSWORLD_IMAGE
    """The OSWorld Ubuntu qcow2 (the backing file of every overlay; never written)."""
    state_dir: Path = Field(default_factory=default_qemu_state_dir)
    """Where each desktop's overlay, record and log live; shared by every
    `cua-rl` invocation so `vm list/down` find VMs that `vm up` left."""
    kvm: Literal["auto", "on", "off"] = "auto"
    """`auto`: `-enable-kvm -cpu host` when /dev/kvm is usable, else software
    emulation (slow, with a warning); `on`: require KVM; `off`: never use it."""
    memory_mb: int = Field(4096, ge=512, le=262144)
    """Guest memory in MiB (OSWorld uses 4 GiB)."""
    cpus: int = Field(4, ge=1, le=64)
    """Guest vCPUs."""
    firmware: Path | None = Field(default_factory=default_firmware)
    """UEFI firmware passed as `-bios` (the OSWorld image boots with UEFI); default
    the installed OVMF (`apt-get install ovmf`); None boots with SeaBIOS."""
    host: str = "127.0.0.1"
    """Host address the forwarded guest (5000) and CDP (9222) ports and VNC bind to."""
    guest_port: int = Field(5000, ge=1, le=65535)
    """Port of the guest server inside the VM (OSWorld's server listens on 5000)."""
    vnc: bool = True
    """Serve the screen over VNC on a free port (for watching a desktop)."""
    extra_args: list[str] = Field(default_factory=list)
    """More `qemu-system-x86_64` arguments, appended last."""
    kernel: Path | None = None
    """Boot this kernel directly (`-kernel`, with `initrd`), as images from `cua-rl
    image build --format qcow2` are; None: the vmlinuz beside `image` when there is
    one (our images), else the image's own boot loader (OSWorld's)."""
    initrd: Path | None = None
    """The initrd of `kernel`; None: the initrd.img beside `image`."""
    restrict_network: bool = True
    """User-mode networking with `restrict=on`: the VM reaches nothing outside;
    only the host's forwards into it (on `host`) work."""
    run_as: str | None = "auto"
    """Account QEMU drops to (`-runas`) once it has opened its disk, sockets and
    forwards, when cua-rl runs as root: a VM that escapes its emulator then holds
    that account's rights, not root's. `auto`: the desktop account `user` when it
    exists (./setup.sh makes it), else no drop (a warning); None: never drop."""
    snapshot_reset: bool = True
    """Reset by restoring the VM snapshot saved when the desktop first answered
    (`loadvm`: seconds, no reboot); False: reboot from a fresh overlay."""
    kvm_probe_s: float = Field(20.0, gt=0, le=120)
    """With `kvm: auto` and a direct-boot kernel: a probe boot under KVM must print
    the kernel's first line within this time, else software emulation is used. The
    answer is kept until the machine reboots (`kvm-probe.json` beside the caches)."""
    ready_timeout_s: float = Field(600.0, gt=0, le=3600)
    """Deadline for the guest to answer after QEMU starts (KVM boot: ~30-90 s)."""
    command_timeout_s: float = Field(60.0, gt=0)
    """Deadline of one `qemu-img` call."""

    @property
    def has_network(self) -> bool:
        """Whether desktops reach the internet (read by `cua-rl tasks check`): only
        without `restrict_network`."""
        return not self.restrict_network
