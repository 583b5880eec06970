"""Host-side helpers shared by the VM-backed providers (docker, qemu): running a
CLI tool without blocking the event loop, finding the OSWorld disk image, and
deciding on KVM.

Every failure here is a `DesktopError` whose message names the tool or path and
what to do about it; a missing executable is never a bare FileNotFoundError.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cua_rl.errors import DesktopError

log = logging.getLogger(__name__)

KVM_DEVICE = Path("/dev/kvm")

DEFAULT_OSWORLD_IMAGE = Path("~/.cache/cua-rl/osworld/Ubuntu.qcow2")

OSWORLD_IMAGE_HELP = (
    "download OSWorld's Ubuntu image (about 12 GB zipped, 23 GB unpacked) as its README "
    "says: `wget https://huggingface.co/datasets/xlangai/ubuntu_osworld/resolve/main/"
    "Ubuntu.qcow2.zip && unzip Ubuntu.qcow2.zip -d ~/.cache/cua-rl/osworld/` (OSWorld's "
    "`DesktopEnv(provider_name='docker')` fetches the same file into ./docker_vm_data), "
    "or set `image:` in the provider config to where you keep it"
)


@dataclass(frozen=True, slots=True)
class CommandResult:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def describe(self) -> str:
        """`argv` + exit code + stderr, for error messages."""
        err = (self.stderr or self.stdout).strip()[-2000:]
        return f"`{' '.join(self.argv)}` exited with {self.returncode}: {err}"


def require_tool(tool: str, hint: str) -> str:
    """The absolute path of `tool` on PATH; DesktopError with `hint` when absent."""
    path = shutil.which(tool)
    if path is None:
        raise DesktopError(f"`{tool}` not found on PATH; {hint}")
    return path


async def run_command(argv: list[str], *, timeout: float, hint: str = "") -> CommandResult:
    """Run a short CLI command as an asyncio subprocess and capture its output.

    A missing executable or a command that outlives `timeout` is a DesktopError;
    a non-zero exit is returned, not raised, because callers know which exits
    are fine (e.g. `docker rm` of a container that is already gone).
    """
    require_tool(argv[0], hint or "install it or fix PATH")
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as exc:
        raise DesktopError(f"cannot run `{argv[0]}`: {exc}; {hint}") from exc
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError as exc:
        proc.kill()
        await proc.wait()
        raise DesktopError(f"`{' '.join(argv)}` did not finish within {timeout:.0f} s") from exc
    except BaseException:  # cancelled: do not leave the child running
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        raise
    assert proc.returncode is not None
    return CommandResult(
        tuple(argv), proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")
    )


def require_image(path: Path, provider: str) -> Path:
    """The absolute path of the OSWorld disk image; DesktopError saying how to get it."""
    resolved = Path(path).expanduser().absolute()
    if not resolved.is_file():
        raise DesktopError(
            f"{provider} provider: disk image {resolved} not found; {OSWORLD_IMAGE_HELP}"
        )
    return resolved


def use_kvm(mode: Literal["auto", "on", "off"], provider: str) -> bool:
    """Whether to use KVM: `auto` uses it when /dev/kvm is usable, `on` requires it.

    Without KVM the VM runs under software emulation (TCG), 10-50x slower: an
    OSWorld desktop then takes minutes to boot and seconds per action, so we warn.
    """
    usable = KVM_DEVICE.exists() and os.access(KVM_DEVICE, os.R_OK | os.W_OK)
    if mode == "on" and not usable:
        raise DesktopError(
            f"{provider} provider: kvm=on but {KVM_DEVICE} is missing or not "
            "accessible (load kvm_intel/kvm_amd, add the user to group kvm, "
            "or pass the device into this container)"
        )
    if mode == "off" or not usable:
        log.warning(
            "%s provider: running without KVM (software emulation); desktops "
            "will be very slow to boot and to act",
            provider,
        )
        return False
    return True
