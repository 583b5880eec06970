"""A minimal QMP client (QEMU's JSON machine protocol on a Unix socket), enough
to save and restore VM snapshots, and the bounded KVM probe boot.

Snapshots go through `human-monitor-command` (`savevm`/`loadvm`): they are
synchronous, write the VM state into the desktop's qcow2 overlay, and exist in
every QEMU version we meet (the job-based `snapshot-save` needs QEMU >= 6.0).
"""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import time
from pathlib import Path
from typing import Any

from cua_rl.errors import DesktopError

log = logging.getLogger(__name__)

KVM_PROBE_MARK = b"Linux version"


async def qmp_command(socket_path: Path, execute: str, timeout: float = 120.0,
                      **arguments: Any) -> Any:
    """Connect, negotiate, run one command, return its `return` value."""
    async def talk() -> Any:
        reader, writer = await asyncio.open_unix_connection(str(socket_path), limit=1 << 22)
        try:
            await reader.readline()  # greeting
            for cmd in ({"execute": "qmp_capabilities"},
                        {"execute": execute, **({"arguments": arguments} if arguments else {})}):
                writer.write(json.dumps(cmd).encode() + b"\n")
                await writer.drain()
                while True:  # skip asynchronous events
                    reply = json.loads(await reader.readline() or b"{}")
                    if "return" in reply or "error" in reply or not reply:
                        break
                if "return" not in reply:
                    raise DesktopError(f"QMP {cmd['execute']} on {socket_path}: {reply}")
            return reply["return"]
        finally:
            writer.close()
    try:
        return await asyncio.wait_for(talk(), timeout)
    except TimeoutError:
        raise DesktopError(f"QMP {execute} on {socket_path}: no answer in {timeout:.0f} s"
                           ) from None
    except OSError as exc:
        raise DesktopError(f"QMP {execute} on {socket_path}: {exc}") from exc


async def hmp(socket_path: Path, command_line: str, timeout: float = 300.0) -> str:
    """A monitor command; its text output, which is empty on success for savevm/loadvm."""
    out = await qmp_command(socket_path, "human-monitor-command", timeout=timeout,
                            **{"command-line": command_line})
    return str(out or "").strip()


_KVM_PROBES: dict[tuple[str, str], bool] = {}


def kvm_boots(qemu: str, kernel: Path, initrd: Path, deadline_s: float) -> bool:
    """Whether a KVM guest gets as far as the kernel's first console line within
    the deadline: /dev/kvm can open and still hang (nested virtualisation without
    support), so its presence alone is no answer. Cached per process."""
    key = (str(kernel), str(initrd))
    if key in _KVM_PROBES:
        return _KVM_PROBES[key]
    argv = [qemu, "-enable-kvm", "-cpu", "host", "-m", "256", "-nodefaults",
            "-display", "none", "-serial", "stdio", "-no-reboot", "-kernel", str(kernel),
            "-initrd", str(initrd), "-append", "console=ttyS0 panic=-1"]
    began, seen = time.monotonic(), b""
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    try:
        import selectors

        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)  # type: ignore[arg-type]
        while KVM_PROBE_MARK not in seen and time.monotonic() - began < deadline_s:
            if sel.select(timeout=0.5):
                chunk = proc.stdout.read1(4096)  # type: ignore[union-attr]
                if not chunk:
                    break
                seen += chunk
    finally:
        proc.kill()
        proc.wait()
    ok = KVM_PROBE_MARK in seen
    log.warning("qemu provider: %s", "KVM probe boot succeeded: using KVM" if ok else
                "KVM probe boot did not reach the kernel's first line (within "
                f"{deadline_s:.0f} s): using TCG (software emulation, several times slower)")
    _KVM_PROBES[key] = ok
    return ok
