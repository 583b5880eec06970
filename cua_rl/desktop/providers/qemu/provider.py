"""The `qemu` provider: OSWorld desktops as `qemu-system-x86_64` processes.

Each desktop boots from its own copy-on-write overlay of the read-only OSWorld
qcow2 (`qemu-img create -f qcow2 -b BASE -F qcow2 overlay.qcow2`), so desktops
share one base image and a reset is: kill QEMU, discard the overlay, create a
fresh one, boot again (same ports, so the URL survives). The guest server is
reached through user-mode networking with a host port forward; no bridge, no
root needed beyond /dev/kvm access.

Images from `cua-rl image build --format qcow2` boot their kernel directly (the
vmlinuz and initrd.img beside the disk), get a fresh guest token on the kernel
command line, and run with `restrict=on` networking. Once a desktop's guest
first answers, its state is saved as the VM snapshot `ready` (QMP `savevm`); a
reset restores it (`loadvm`) instead of rebooting, falling back to a reboot on
a fresh overlay when there is no snapshot.

Every desktop is recorded under the state dir once its guest answers
(`<id>/state.json`, plus `<id>/overlay.qcow2` and `<id>/qemu.log`), so a VM
outlives the process that started it and later `cua-rl vm` commands find it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import pwd
import secrets
import time
from pathlib import Path

from cua_rl.desktop.providers.base import DesktopHandle, ForkPoint
from cua_rl.desktop.providers.local.session import process_start_time
from cua_rl.desktop.providers.process_core import ProcessDesktops
from cua_rl.desktop.providers.qemu import forks
from cua_rl.desktop.providers.qemu.config import QemuProviderConfig
from cua_rl.desktop.providers.qemu.kvm import kvm_boots
from cua_rl.desktop.providers.qemu.qmp import hmp
from cua_rl.desktop.providers.qemu.state import QemuRecord, bindable, kill_vm, spawn, tail
from cua_rl.desktop.providers.vm_host import (
    KVM_DEVICE,
    require_image,
    require_tool,
    run_command,
    use_kvm,
)
from cua_rl.errors import DesktopError, GuestUnavailable

log = logging.getLogger(__name__)
SNAPSHOT = "ready"

QEMU = "qemu-system-x86_64"
QEMU_IMG = "qemu-img"
QEMU_HINT = "apt-get install qemu-system-x86 qemu-utils (or your distribution's qemu packages)"
CDP_PORT = 9222
DESKTOP_ACCOUNT = "user"
"""The account `run_as: auto` drops QEMU to (the local provider's desktop user)."""


def overlay_argv(base: Path, overlay: Path) -> list[str]:
    """`qemu-img` command that makes a fresh COW overlay backed by `base`."""
    return [QEMU_IMG, "create", "-q", "-f", "qcow2", "-b", str(base), "-F", "qcow2", str(overlay)]


class QemuProvider(ProcessDesktops[QemuRecord]):
    """Runs one QEMU process per desktop on a per-desktop overlay; see the module docstring."""

    type = "qemu"
    record_type = QemuRecord
    cannot_fork = None  # forks.py: memory and devices by migration, the disk frozen

    def __init__(self, config: QemuProviderConfig | None = None) -> None:
        self.config = config or QemuProviderConfig()
        super().__init__(Path(self.config.state_dir))

    # what differs from other providers ----------------------------------------

    async def start(self, desktop_id: str) -> DesktopHandle:
        base = require_image(self.config.image, self.type)
        require_tool(QEMU, QEMU_HINT)

        async def launch(ddir: Path) -> DesktopHandle:
            await self._make_overlay(base, ddir / "overlay.qcow2")
            return await self._launch(desktop_id, base, prefer=None)

        return await self._start_fresh(desktop_id, launch)

    async def _reset(self, handle: DesktopHandle) -> DesktopHandle:
        """Back to the `ready` snapshot (or the fork's home); else, or when the restore
        fails (QEMU died), kill QEMU, replace the overlay with a fresh one, boot again on
        the same ports."""
        record = self._record(handle.id)
        base = require_image(self.config.image, self.type)
        if record.active is not None:  # running a fork: back to its own overlay
            return await forks.return_home(self, record)
        if record.snapshot and record.alive and record.qmp:
            try:
                return await self._restore(record)
            except DesktopError as exc:  # QEMU gone (unreaped, it still looks alive)
                log.warning("qemu desktop %s: no restore (%s); booting it again", record.id, exc)
        await asyncio.to_thread(self._kill, record)
        overlay = Path(record.overlay)
        await asyncio.to_thread(overlay.unlink, True)
        await self._make_overlay(base, overlay)
        return await self._launch(record.id, base, prefer=record)

    async def save_fork(self, handle: DesktopHandle, name: str) -> ForkPoint:
        return await forks.save_fork(self, handle, name)

    async def restore_fork(self, handle: DesktopHandle, point: ForkPoint) -> DesktopHandle:
        return await forks.restore_fork(self, handle, point)

    async def drop_fork(self, point: ForkPoint) -> None:
        await forks.drop_fork(self, point)

    def boot_files(self, base: Path) -> tuple[Path, Path] | None:
        """(kernel, initrd) for a direct boot, or None to boot the image's loader."""
        cfg = self.config
        kernel = cfg.kernel or (base.parent / "vmlinuz")
        initrd = cfg.initrd or (base.parent / "initrd.img")
        if cfg.kernel is None and not kernel.is_file():
            return None
        for path in (kernel, initrd):
            if not Path(path).is_file():
                raise DesktopError(
                    f"qemu provider: {path} not found (kernel/initrd of the "
                    "image; rebuild it with `cua-rl image build --format qcow2`)"
                )
        return Path(kernel).absolute(), Path(initrd).absolute()

    def run_as(self) -> str | None:
        """The account QEMU drops to (`-runas`), or None: only when we are root (see
        `QemuProviderConfig.run_as`); an explicit account that does not exist is an error."""
        name = self.config.run_as
        if name is None or os.geteuid() != 0:
            return None
        wanted = DESKTOP_ACCOUNT if name == "auto" else name
        try:
            pwd.getpwnam(wanted)
        except KeyError:
            if name == "auto":
                log.warning(
                    "qemu provider: running QEMU as root (no account %r to drop to; "
                    "set desktops.provider.run_as)",
                    wanted,
                )
                return None
            raise DesktopError(
                f"qemu provider: run_as account {wanted!r} does not exist "
                "(create it, or set run_as: null)"
            ) from None
        return wanted

    def qemu_argv(
        self,
        desktop_id: str,
        overlay: Path,
        *,
        port: int,
        cdp_port: int,
        vnc_port: int | None,
        kvm: bool,
        boot: tuple[Path, Path] | None = None,
        token: str | None = None,
        qmp: Path | None = None,
        run_as: str | None = None,
        more: tuple[str, ...] = (),
    ) -> list[str]:
        """The QEMU command line of one desktop (a pure function, tested)."""
        cfg = self.config
        argv = [
            QEMU,
            "-name",
            f"cua-rl-{desktop_id}",
            "-machine",
            "q35",
            "-smp",
            str(cfg.cpus),
            "-m",
            str(cfg.memory_mb),
        ]
        if run_as is not None:  # dropped after the disk, sockets and forwards are open
            argv += ["-runas", run_as]
        argv += ["-enable-kvm", "-cpu", "host"] if kvm else ["-cpu", "max"]
        if boot is not None:  # our image: its kernel, the session script as init
            append = (
                "root=/dev/vda rw console=ttyS0 net.ifnames=0 quiet init=/usr/local/bin/cua-desktop"
            )
            if token:
                append += f" cua_guest_token={token}"
            argv += [
                "-kernel",
                str(boot[0]),
                "-initrd",
                str(boot[1]),
                "-append",
                append,
                "-serial",
                f"file:{overlay.parent / 'console.log'}",
            ]
        elif cfg.firmware is not None:
            argv += ["-bios", str(cfg.firmware)]
        argv += [
            "-drive",
            f"file={overlay},if=virtio,format=qcow2,discard=unmap",
            "-netdev",
            f"user,id=net0,hostfwd=tcp:{cfg.host}:{port}-:{cfg.guest_port},"
            f"hostfwd=tcp:{cfg.host}:{cdp_port}-:{CDP_PORT}"
            + (",restrict=on" if cfg.restrict_network else ""),
            "-device",
            "virtio-net-pci,netdev=net0",
            # a tablet gives absolute pointer coordinates (VNC and pyautogui agree)
            "-usb",
            "-device",
            "usb-tablet",
            "-display",
            "none",
            "-monitor",
            "none",
        ]
        if vnc_port is not None:
            argv += ["-vnc", f"{cfg.host}:{vnc_port - 5900}"]
        if qmp is not None:
            argv += ["-qmp", f"unix:{qmp},server=on,wait=off"]
        return [*argv, *more, *cfg.extra_args]

    # internals ----------------------------------------------------------------

    async def _make_overlay(self, base: Path, overlay: Path) -> None:
        result = await run_command(
            overlay_argv(base, overlay), hint=QEMU_HINT, timeout=self.config.command_timeout_s
        )
        if not result.ok:
            raise DesktopError(
                f"qemu provider: cannot create overlay {overlay}: {result.describe()}"
            )

    def _handle(self, record: QemuRecord) -> DesktopHandle:
        info: dict[str, object] = {
            "pid": record.pid,
            "overlay": record.overlay,
            "log": record.log,
            "kvm": record.kvm,
            "cdp_port": record.cdp_port,
            "alive": record.alive,
            "limits": {"memory_mb": self.config.memory_mb, "cpus": self.config.cpus},
        }
        if record.vnc_port is not None:
            info["vnc"] = f"{self.config.host}:{record.vnc_port}"
        info["snapshot"] = record.snapshot
        if record.fork is not None:
            info["fork"] = record.fork
        return DesktopHandle(
            id=record.id, url=record.url, token=record.token, provider=self.type, info=info
        )

    def _port(self, prefer: int | None, low: int | None = None) -> int:
        """A free port (`prefer` when free; at or above `low` when given, as VNC
        ports map to display numbers) not handed to another desktop meanwhile."""
        candidates = ([prefer] if prefer else []) + (
            list(range(low, low + 100)) if low else [0] * 50
        )
        return self._ports.claim(
            candidates,
            lambda port: bindable(self.config.host, port),
            f"qemu provider on {self.config.host}",
        )

    async def _launch(
        self, desktop_id: str, base: Path, *, prefer: QemuRecord | None
    ) -> DesktopHandle:
        """Start QEMU and wait for the guest; record the VM on success, kill it on failure."""
        ddir = self.state_dir / desktop_id
        overlay, log_path = ddir / "overlay.qcow2", ddir / "qemu.log"
        boot = self.boot_files(base)
        kvm = await self._use_kvm(boot)
        token = (prefer.token if prefer else None) or (secrets.token_urlsafe(24) if boot else None)
        qmp = ddir / "qmp.sock"
        port = self._port(prefer.port if prefer else None)
        cdp_port = self._port(prefer.cdp_port if prefer else None)
        vnc_port = (
            self._port(prefer.vnc_port if prefer else None, low=5900) if self.config.vnc else None
        )
        argv = self.qemu_argv(
            desktop_id,
            overlay,
            port=port,
            cdp_port=cdp_port,
            vnc_port=vnc_port,
            kvm=kvm,
            boot=boot,
            token=token,
            qmp=qmp,
            run_as=self.run_as(),
        )
        fds = forks.drive_fds(overlay)  # the disk as descriptors (forks.py says why)
        argv = forks.fdset_argv(argv, overlay, fds)
        try:
            proc = await asyncio.to_thread(spawn, argv, log_path, fds)
            self._track(desktop_id, proc, watch_owner=True)
            host = "127.0.0.1" if self.config.host == "0.0.0.0" else self.config.host
            url = f"http://{host}:{port}"
            record = QemuRecord(
                id=desktop_id,
                url=url,
                port=port,
                cdp_port=cdp_port,
                vnc_port=vnc_port,
                pid=proc.pid,
                start_time=process_start_time(proc.pid) or 0.0,
                overlay=str(overlay),
                log=str(log_path),
                kvm=kvm,
                token=token,
                qmp=str(qmp),
            )
            handle = self._handle(record)
            try:
                await self._process_ready(
                    proc, handle, QEMU, timeout_s=self.config.ready_timeout_s, interval_s=0.2
                )
            except (DesktopError, OSError) as exc:
                await asyncio.to_thread(self._kill, record)
                console = ddir / "console.log"
                serial = (
                    f"\n--- {console} (tail) ---\n{tail(console, 1500)}" if console.exists() else ""
                )
                raise DesktopError(
                    f"qemu desktop {desktop_id!r} did not start: {exc}\n"
                    f"--- {log_path} (tail) ---\n{tail(log_path)}{serial}"
                ) from exc
            except BaseException:  # cancelled while booting: leave nothing running
                self._kill(record)
                raise
        finally:
            self._ports.release(port, cdp_port, vnc_port)
            forks.close_fds(fds)
        if self.config.snapshot_reset:
            record.snapshot = await self._save_snapshot(record)
        record.save(ddir)
        return self._handle(record)

    async def _use_kvm(self, boot: tuple[Path, Path] | None) -> bool:
        """KVM when a bounded probe boot shows it works (direct-boot images), else
        the `kvm` setting as for OSWorld's image."""
        if boot is None or self.config.kvm != "auto":
            return use_kvm(self.config.kvm, self.type)
        if not KVM_DEVICE.exists():
            return use_kvm("off", self.type)
        return await asyncio.to_thread(kvm_boots, QEMU, boot[0], boot[1], self.config.kvm_probe_s)

    async def _save_snapshot(self, record: QemuRecord) -> bool:
        """Save the booted desktop as the `ready` snapshot; False (reset reboots)
        when QEMU cannot."""
        began = time.monotonic()
        try:
            out = await hmp(Path(record.qmp or ""), f"savevm {SNAPSHOT}")
        except DesktopError as exc:
            log.warning("qemu desktop %s: no snapshot, resets will reboot: %s", record.id, exc)
            return False
        if out:  # savevm prints only errors
            log.warning("qemu desktop %s: savevm failed, resets will reboot: %s", record.id, out)
            return False
        log.info("qemu desktop %s: snapshot saved in %.1f s", record.id, time.monotonic() - began)
        return True

    async def _restore(self, record: QemuRecord) -> DesktopHandle:
        """`loadvm ready`, then wait for the guest: the desktop as it first answered."""
        out = await hmp(Path(record.qmp or ""), f"loadvm {SNAPSHOT}")
        if out:
            raise DesktopError(f"qemu desktop {record.id!r}: loadvm {SNAPSHOT} failed: {out}")
        handle = self._handle(record)
        try:
            await self.client(handle).wait_ready(self.config.ready_timeout_s, interval_s=0.1)
        except GuestUnavailable as exc:
            raise DesktopError(f"qemu desktop {record.id!r}: no guest after loadvm: {exc}") from exc
        return handle

    def _kill(self, record: QemuRecord) -> None:
        kill_vm(record, self._procs.get(record.id))
        self._reap(record.id)
