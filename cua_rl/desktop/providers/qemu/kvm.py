"""The bounded KVM probe boot, and its answer kept for the machine's boot.

/dev/kvm can open and a KVM guest still hang before its kernel prints (nested
virtualisation without support), so the qemu provider boots the image's kernel
under KVM once and waits at most `kvm_probe_s` for its first console line. On a
machine where KVM hangs that costs the whole deadline, in every process that
starts a VM; the answer cannot change until the machine reboots (or its KVM
module is reloaded), so it is kept in `kvm-probe.json` beside the other caches,
keyed by the kernel boot id, QEMU and the kernel file. Delete the file to probe
again.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import threading
import time
from pathlib import Path

from cua_rl.atomic_file import write_text_atomic

log = logging.getLogger(__name__)

KVM_PROBE_MARK = b"Linux version"
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
_LOCK = threading.Lock()  # concurrent starts in one process probe once


def probe_cache_file() -> Path:
    """`$CUA_RL_STATE_DIR/kvm-probe.json`, else `~/.cache/cua-rl/kvm-probe.json`."""
    env = os.environ.get("CUA_RL_STATE_DIR")
    return (Path(env) if env else Path.home() / ".cache" / "cua-rl") / "kvm-probe.json"


def _key(qemu: str, kernel: Path) -> str:
    try:
        boot = BOOT_ID.read_text().strip()
        stat = kernel.stat()
    except OSError:
        return ""
    return f"{boot}|{qemu}|{kernel.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"


def _cached(path: Path, key: str) -> bool | None:
    try:
        answer = json.loads(path.read_text()).get(key)
    except (OSError, ValueError, AttributeError):
        return None
    return answer if isinstance(answer, bool) else None


def _remember(path: Path, key: str, ok: bool) -> None:
    """Best effort (a read-only home only costs the next process a probe)."""
    try:
        entries = json.loads(path.read_text())
        entries = entries if isinstance(entries, dict) else {}
    except (OSError, ValueError):
        entries = {}
    boot = key.split("|", 1)[0]
    entries = {k: v for k, v in entries.items() if k.startswith(boot + "|")}  # this boot only
    entries[key] = ok
    try:
        write_text_atomic(path, json.dumps(entries, indent=1))
    except OSError as exc:
        log.debug("qemu provider: cannot keep the KVM probe's answer in %s: %s", path, exc)


def kvm_boots(
    qemu: str, kernel: Path, initrd: Path, deadline_s: float, cache: Path | None = None
) -> bool:
    """Whether a KVM guest gets as far as the kernel's first console line within
    the deadline; asked once per machine boot (see the module docstring)."""
    cache = cache or probe_cache_file()
    key = _key(qemu, kernel)
    with _LOCK:
        if key and (known := _cached(cache, key)) is not None:
            log.info(
                "qemu provider: KVM %s on this machine (probed earlier this boot; %s)",
                "works" if known else "hangs",
                cache,
            )
            return known
        ok = _probe(qemu, kernel, initrd, deadline_s)
        if key:
            _remember(cache, key, ok)
        return ok


def _probe(qemu: str, kernel: Path, initrd: Path, deadline_s: float) -> bool:
    argv = [
        qemu,
        "-enable-kvm",
        "-cpu",
        "host",
        "-m",
        "256",
        "-nodefaults",
        "-display",
        "none",
        "-serial",
        "stdio",
        "-no-reboot",
        "-kernel",
        str(kernel),
        "-initrd",
        str(initrd),
        "-append",
        "console=ttyS0 panic=-1",
    ]
    began, seen = time.monotonic(), b""
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        import selectors

        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)  # type: ignore[arg-type]  # Popen(stdout=PIPE): stdout is a stream
        while KVM_PROBE_MARK not in seen and time.monotonic() - began < deadline_s:
            if sel.select(timeout=0.5):
                chunk = proc.stdout.read1(4096)  # type: ignore[union-attr]  # Popen(stdout=PIPE): stdout is a stream
                if not chunk:
                    break
                seen += chunk
    finally:
        proc.kill()
        proc.wait()
    ok = KVM_PROBE_MARK in seen
    log.warning(
        "qemu provider: %s",
        "KVM probe boot succeeded: using KVM"
        if ok
        else "KVM probe boot did not reach the kernel's first line (within "
        f"{deadline_s:.0f} s): using TCG (software emulation, several times slower)",
    )
    return ok
