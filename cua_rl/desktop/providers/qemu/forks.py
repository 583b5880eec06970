"""Fork points of `qemu` desktops: a running VM's whole state saved once, and any
desktop of the provider started from it (`fleet.fork_groups`).

A fork point is a directory under `<state_dir>/forks/<name>/`:

    state       the VM's memory and device state (QMP `migrate` into a file we open
                and hand to QEMU as a descriptor, the VM stopped first, so memory
                and disk are one instant)
    disk.qcow2  a frozen copy of the VM's disk at that instant: only the clusters its
                overlay holds (`qemu-img convert -B`), backed by the same image
    fork.json   the guest token the saved memory holds, the backing file

Restoring a desktop: its QEMU is stopped, a fresh child overlay of `disk.qcow2`
(`<id>/fork.qcow2`) is made, and QEMU starts on it with `-incoming defer` and loads
`state` (QMP `migrate-incoming`), then continues: the guest runs on as the saved one
did, at once, with no boot.

Every VM gets its writable disk as open descriptors, read-write and read-only
(`-add-fd`, `/dev/fdset/N`, `drive_fds`): saving a VM's state makes QEMU reopen its
disk read-only (the disk goes inactive), and loading one reopens it read-write, both
after QEMU dropped root (`run_as`), when the path itself is out of its reach (the
state dir under /root, a test's tmp dir). The desktop's own overlay, holding its `ready` snapshot,
is kept aside; a reset stops the fork, deletes the child overlay and starts QEMU on
its own overlay with `-loadvm ready` (or boots a fresh overlay without a snapshot).

The saving VM is stopped for good (its QEMU quits); it becomes a fork like the
others, so every rollout of a group starts from the same bytes. The state file is
opened here and passed to QEMU (QMP `getfd`, then `fd:` migration URIs), so a QEMU
that dropped root (`run_as`) needs no access to the fork's directory (0700, ours).

A restored guest holds the saving desktop's guest token (it is in the saved memory):
the record keeps it as the desktop's token while the fork runs, and its own again
after a reset. Under `restrict_network` no guest reaches another desktop's port, so
a shared token opens nothing new.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, Protocol

from cua_rl.desktop.providers.base import DesktopHandle, ForkPoint, GuestClients
from cua_rl.desktop.providers.core import PortBook
from cua_rl.desktop.providers.local.session import process_start_time
from cua_rl.desktop.providers.qemu.config import QemuProviderConfig
from cua_rl.desktop.providers.qemu.qmp import qmp_command, qmp_with_fd
from cua_rl.desktop.providers.qemu.state import QemuRecord, spawn, tail
from cua_rl.desktop.providers.vm_host import require_image, run_command
from cua_rl.errors import DesktopError


class QemuProvider(Protocol):
    """What fork points use of the qemu provider (`provider.QemuProvider`; a protocol,
    so this module and the provider do not import each other)."""

    type: str
    state_dir: Path
    config: QemuProviderConfig
    _clients: GuestClients
    _procs: dict[str, subprocess.Popen]

    def _track(self, desktop_id: str, proc: subprocess.Popen, *, watch_owner: bool) -> None: ...

    _ports: PortBook

    def _record(self, desktop_id: str) -> QemuRecord: ...
    def _kill(self, record: QemuRecord) -> None: ...
    def _port(self, prefer: int | None, low: int | None = None) -> int: ...
    def _handle(self, record: QemuRecord) -> DesktopHandle: ...
    def boot_files(self, base: Path) -> tuple[Path, Path] | None: ...
    def run_as(self) -> str | None: ...
    def client(self, handle: DesktopHandle) -> Any: ...
    def qemu_argv(self, desktop_id: str, overlay: Path, **kwargs: Any) -> list[str]: ...
    async def _process_ready(
        self,
        proc: subprocess.Popen,
        handle: DesktopHandle,
        what: str,
        *,
        timeout_s: float,
        interval_s: float,
    ) -> None: ...
    async def _make_overlay(self, base: Path, overlay: Path) -> None: ...
    async def _launch(
        self, desktop_id: str, base: Path, *, prefer: QemuRecord | None
    ) -> DesktopHandle: ...


FORKS_DIR = "forks"
CHILD_OVERLAY = "fork.qcow2"
MIGRATION_DEADLINE_S = 300.0
"""Saving or loading one VM's memory (a few hundred MB to a local file)."""
MAX_BANDWIDTH = 1 << 40
"""Bytes/s: no cap (QEMU's default caps a migration for a live network link)."""


def fork_dir(provider: QemuProvider, name: str) -> Path:
    return provider.state_dir / FORKS_DIR / name


async def save_fork(provider: QemuProvider, handle: DesktopHandle, name: str) -> ForkPoint:
    """Stop the VM, save its memory and devices and a frozen copy of its disk as fork
    point `name`, and quit it (restore a fork point on it, or reset it, next)."""
    record = provider._record(handle.id)
    if not record.alive or not record.qmp:
        raise DesktopError(f"qemu desktop {handle.id!r}: cannot fork a VM that is not running")
    fdir = fork_dir(provider, name)
    await asyncio.to_thread(fdir.mkdir, 0o700, True)
    began = time.monotonic()
    await provider._clients.drop(handle.id)
    qmp = Path(record.qmp)
    try:
        await qmp_command(qmp, "stop")
        await qmp_command(qmp, "migrate-set-parameters", **{"max-bandwidth": MAX_BANDWIDTH})
        fd = os.open(fdir / "state", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            await qmp_with_fd(qmp, fd, "cua-fork", "migrate", uri="fd:cua-fork")
        finally:
            os.close(fd)  # QEMU holds its own copy
        await _migration_done(qmp, record.id)
    except DesktopError as exc:
        await asyncio.shield(asyncio.to_thread(shutil.rmtree, fdir, True))
        raise DesktopError(f"{exc}\n--- {record.log} (tail) ---\n{tail(Path(record.log))}") from exc
    except BaseException:
        await asyncio.shield(asyncio.to_thread(shutil.rmtree, fdir, True))
        raise
    finally:
        await asyncio.to_thread(provider._kill, record)  # the saved VM never runs again
    active = Path(record.active or record.overlay)
    backing = await _backing_of(provider, active)
    result = await run_command(
        [
            "qemu-img",
            "convert",
            "-q",
            "-f",
            "qcow2",
            "-O",
            "qcow2",
            "-B",
            backing,
            "-F",
            "qcow2",
            str(active),
            str(fdir / "disk.qcow2"),
        ],
        timeout=provider.config.command_timeout_s * 5,
    )
    if not result.ok:
        await asyncio.to_thread(shutil.rmtree, fdir, True)
        raise DesktopError(
            f"qemu desktop {record.id!r}: cannot freeze its disk for fork "
            f"{name!r}: {result.describe()}"
        )
    (fdir / "fork.json").write_text(
        json.dumps(
            {
                "token": record.token,
                "backing": backing,
                "from": record.id,
                "saved_s": round(time.monotonic() - began, 3),
            }
        )
    )
    return ForkPoint(
        name,
        provider.type,
        {"dir": str(fdir), "token": record.token, "saved_s": round(time.monotonic() - began, 3)},
    )


async def restore_fork(
    provider: QemuProvider, handle: DesktopHandle, point: ForkPoint
) -> DesktopHandle:
    """Start the desktop's QEMU anew from the fork point (see the module docstring)."""
    began = time.monotonic()
    fdir = Path(str(point.info.get("dir", "")))
    if (
        point.provider != provider.type
        or not (fdir / "state").is_file()
        or not (fdir / "disk.qcow2").is_file()
    ):
        raise DesktopError(f"qemu: fork point {point.name!r} is not a saved qemu fork ({fdir})")
    record = provider._record(handle.id)
    await provider._clients.drop(handle.id)
    await asyncio.to_thread(provider._kill, record)
    child = provider.state_dir / record.id / CHILD_OVERLAY
    await asyncio.to_thread(child.unlink, True)
    made = await run_command(
        [
            "qemu-img",
            "create",
            "-q",
            "-f",
            "qcow2",
            "-b",
            str(fdir / "disk.qcow2"),
            "-F",
            "qcow2",
            str(child),
        ],
        timeout=provider.config.command_timeout_s,
    )
    if not made.ok:
        raise DesktopError(f"qemu: cannot make {child}: {made.describe()}")
    if record.home_token is None:
        record.home_token = record.token
    record.active, record.fork = str(child), point.name
    token = point.info.get("token")
    record.token = token if isinstance(token, str) else None
    await relaunch(provider, record, child, ("-incoming", "defer"), incoming=fdir / "state")
    restored = provider._handle(record)
    restored.info["restore_s"] = round(time.monotonic() - began, 3)
    return restored


async def return_home(provider: QemuProvider, record: QemuRecord) -> DesktopHandle:
    """Reset of a desktop running a fork: back to its own overlay's `ready` snapshot."""
    await asyncio.to_thread(provider._kill, record)
    await asyncio.to_thread((provider.state_dir / record.id / CHILD_OVERLAY).unlink, True)
    record.active = record.fork = None
    record.token = record.home_token if record.home_token is not None else record.token
    home = Path(record.overlay)
    if record.snapshot:
        await relaunch(provider, record, home, ("-loadvm", "ready"))
        return provider._handle(record)
    # no snapshot to return to: boot a fresh overlay, as a reset without snapshots does
    base = require_image(provider.config.image, provider.type)
    await asyncio.to_thread(home.unlink, True)
    await provider._make_overlay(base, home)
    return await provider._launch(record.id, base, prefer=record)


async def drop_fork(provider: QemuProvider, point: ForkPoint) -> None:
    """Delete the fork point's files; VMs running on it keep their open files."""
    fdir = Path(str(point.info.get("dir", "")))
    if fdir.parent == provider.state_dir / FORKS_DIR:
        await asyncio.to_thread(shutil.rmtree, fdir, True)


async def relaunch(
    provider: QemuProvider,
    record: QemuRecord,
    drive: Path,
    more: tuple[str, ...],
    *,
    incoming: Path | None = None,
) -> None:
    """Start the desktop's QEMU on `drive` with `more` arguments on its old ports (a
    migration loaded from `incoming` first), wait for the guest, save the record."""
    ddir = provider.state_dir / record.id
    base = require_image(provider.config.image, provider.type)
    port = provider._port(record.port)
    cdp_port = provider._port(record.cdp_port)
    vnc_port = provider._port(record.vnc_port, low=5900) if provider.config.vnc else None
    qmp = ddir / "qmp.sock"
    await asyncio.to_thread(qmp.unlink, True)
    argv = provider.qemu_argv(
        record.id,
        drive,
        port=port,
        cdp_port=cdp_port,
        vnc_port=vnc_port,
        kvm=record.kvm,
        boot=provider.boot_files(base),
        token=record.token,
        qmp=qmp,
        run_as=provider.run_as(),
        more=more,
    )
    log_path = Path(record.log)
    fds = drive_fds(drive)
    argv = fdset_argv(argv, drive, fds)
    try:
        proc = await asyncio.to_thread(spawn, argv, log_path, fds)
        provider._track(record.id, proc, watch_owner=True)
        record.pid, record.start_time = proc.pid, process_start_time(proc.pid) or 0.0
        record.port, record.cdp_port, record.vnc_port = port, cdp_port, vnc_port
        host = "127.0.0.1" if provider.config.host == "0.0.0.0" else provider.config.host
        record.qmp, record.url = str(qmp), f"http://{host}:{port}"
        try:
            if incoming is not None:
                await _load(qmp, proc, incoming, record.id)
            await provider._process_ready(
                proc,
                provider._handle(record),
                "qemu-system-x86_64",
                timeout_s=provider.config.ready_timeout_s,
                interval_s=0.2,
            )
        except (DesktopError, OSError) as exc:
            await asyncio.to_thread(provider._kill, record)
            raise DesktopError(
                f"qemu desktop {record.id!r} did not come back on {drive.name} "
                f"({' '.join(more)}): {exc}\n--- {log_path} (tail) ---\n"
                f"{tail(log_path)}"
            ) from exc
        except BaseException:
            provider._kill(record)
            raise
    finally:
        provider._ports.release(port, cdp_port, vnc_port)
        close_fds(fds)
    record.save(ddir)


FDSET = 1


def drive_fds(drive: Path) -> tuple[int, int]:
    """The disk opened read-write and read-only, for QEMU's fd set (close both with
    `close_fds` once QEMU started: it holds its own copies)."""
    rw = os.open(drive, os.O_RDWR)
    try:
        return rw, os.open(drive, os.O_RDONLY)
    except OSError:
        os.close(rw)
        raise


def close_fds(fds: tuple[int, ...]) -> None:
    for fd in fds:
        os.close(fd)


def fdset_argv(argv: list[str], drive: Path, fds: tuple[int, ...]) -> list[str]:
    """`argv` with the drive opened from fd set FDSET (`-add-fd` for each of `fds`)
    instead of its path (a pure function, tested)."""
    out = [
        a.replace(f"file={drive},", f"file=/dev/fdset/{FDSET},") if a.startswith("file=") else a
        for a in argv
    ]
    if out == argv:
        raise DesktopError(f"qemu: no -drive file={drive} in the command line")
    added = [x for fd in fds for x in ("-add-fd", f"fd={fd},set={FDSET}")]
    return [out[0], *added, *out[1:]]


async def _load(qmp: Path, proc: subprocess.Popen, state: Path, desktop_id: str) -> None:
    """Load the saved memory into a QEMU started with `-incoming defer`, then run it."""
    deadline = time.monotonic() + 30.0
    while not await asyncio.to_thread(os.path.exists, qmp):  # QEMU makes it as it starts
        if proc.poll() is not None or time.monotonic() > deadline:
            raise DesktopError(f"qemu desktop {desktop_id!r}: no QMP socket at {qmp}")
        await asyncio.sleep(0.02)
    fd = os.open(state, os.O_RDONLY)
    try:
        await qmp_with_fd(qmp, fd, "cua-fork", "migrate-incoming", uri="fd:cua-fork")
    finally:
        os.close(fd)
    end = time.monotonic() + MIGRATION_DEADLINE_S
    while (await qmp_command(qmp, "query-status"))["status"] == "inmigrate":
        if time.monotonic() > end:
            raise DesktopError(
                f"qemu desktop {desktop_id!r}: loading {state} took over "
                f"{MIGRATION_DEADLINE_S:.0f} s"
            )
        await asyncio.sleep(0.02)
    status = (await qmp_command(qmp, "query-migrate")).get("status")
    if status != "completed":
        raise DesktopError(f"qemu desktop {desktop_id!r}: loading {state}: migration {status}")
    await qmp_command(qmp, "cont")


async def _migration_done(qmp: Path, desktop_id: str) -> None:
    end = time.monotonic() + MIGRATION_DEADLINE_S
    while True:
        state = await qmp_command(qmp, "query-migrate")
        status = state.get("status")
        if status == "completed":
            return
        if status in ("failed", "cancelled") or time.monotonic() > end:
            raise DesktopError(
                f"qemu desktop {desktop_id!r}: saving its state: {status} "
                f"{state.get('error-desc', '')}".rstrip()
            )
        await asyncio.sleep(0.02)


async def _backing_of(provider: QemuProvider, overlay: Path) -> str:
    result = await run_command(
        ["qemu-img", "info", "-U", "--output=json", str(overlay)],
        timeout=provider.config.command_timeout_s,
    )
    try:
        backing = json.loads(result.stdout)["full-backing-filename"] if result.ok else None
    except (ValueError, KeyError):
        backing = None
    if not isinstance(backing, str):
        raise DesktopError(f"qemu: cannot read the backing file of {overlay}: {result.describe()}")
    return backing
