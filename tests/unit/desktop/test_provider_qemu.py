"""The qemu provider with the real `qemu-img` (overlays of a tiny qcow2 made
here) and a fake `qemu-system-x86_64` first on PATH (no OSWorld image here).

The fake records its argv, checks that the -drive overlay is a qcow2 backed by
the base image (as QEMU would fail otherwise) and becomes an HTTP server on the
forwarded guest port, so readiness and health go through the real GuestClient.
FAKE_QEMU_MODE=crash makes it exit at once with QEMU's kind of error.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from cua_rl.desktop.providers.qemu.config import QemuProviderConfig
from cua_rl.desktop.providers.qemu.provider import QemuProvider, QemuRecord, overlay_argv
from cua_rl.errors import DesktopError

pytestmark = pytest.mark.skipif(
    shutil.which("qemu-img") is None or shutil.which("qemu-io") is None,
    reason="qemu-img/qemu-io missing (apt-get install qemu-utils)",
)

FAKE_QEMU = r"""
import fcntl, json, os, re, subprocess, sys
from pathlib import Path

state = Path(os.environ["FAKE_QEMU_DIR"])
with open(state / "calls.jsonl", "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\n")
drive = sys.argv[sys.argv.index("-drive") + 1]
overlay = re.match(r"file=([^,]+)", drive).group(1)
if overlay.startswith("/dev/fdset/"):  # the disk comes as open descriptors (-add-fd)
    fds = [int(re.match(r"fd=(\d+)", sys.argv[i + 1]).group(1))
           for i, a in enumerate(sys.argv) if a == "-add-fd"]
    modes = {os.O_RDWR: "rw", os.O_RDONLY: "ro"}
    assert sorted(modes[fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE] for fd in fds) == [
        "ro", "rw"], fds
    overlay = os.readlink(f"/proc/self/fd/{fds[0]}")
if os.environ.get("FAKE_QEMU_MODE") == "crash":
    sys.stderr.write(f"qemu-system-x86_64: -drive {drive}: Could not open backing file\n")
    sys.exit(1)
info = json.loads(subprocess.run(["qemu-img", "info", "--output=json", overlay],
                                 capture_output=True, text=True, check=True).stdout)
assert info["format"] == "qcow2" and info["backing-filename"], info
netdev = sys.argv[sys.argv.index("-netdev") + 1]
host, port = re.search(r"hostfwd=tcp:([\d.]+):(\d+)-:5000", netdev).groups()
os.execv(sys.executable, [sys.executable, "-m", "http.server", port, "--bind", host,
                          "--directory", str(state / "www")])
"""


@pytest.fixture
def fake_qemu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bindir, state = tmp_path / "bin", tmp_path / "qemu-state"
    bindir.mkdir()
    (state / "www").mkdir(parents=True)
    (state / "www" / "healthz").write_text("ok")
    script = bindir / "qemu-system-x86_64"
    script.write_text(f"#!{sys.executable}\n{FAKE_QEMU}")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_QEMU_DIR", str(state))
    return state


@pytest.fixture
def base_image(tmp_path: Path) -> Path:
    """A real (tiny) qcow2 to back the overlays."""
    path = tmp_path / "Ubuntu.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(path), "16M"], check=True)
    return path


def config(tmp_path: Path, image: Path, **kwargs) -> QemuProviderConfig:
    return QemuProviderConfig(
        image=image, state_dir=tmp_path / "vms", ready_timeout_s=20, firmware=None, **kwargs
    )


def qemu_info(path: Path) -> dict:
    return json.loads(
        subprocess.run(
            ["qemu-img", "info", "--output=json", str(path)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )


def guest_write(overlay: Path) -> None:
    """What a running guest does to its disk: 1 MiB of new data in the overlay."""
    subprocess.run(
        ["qemu-io", "-c", "write -P 0x5a 0 1M", str(overlay)], check=True, capture_output=True
    )


def compare(base: Path, overlay: Path) -> int:
    """`qemu-img compare`: 0 identical contents, 1 different."""
    return subprocess.run(
        ["qemu-img", "compare", "-U", str(base), str(overlay)], capture_output=True
    ).returncode


def calls(state: Path) -> list[list[str]]:
    return [json.loads(line) for line in (state / "calls.jsonl").read_text().splitlines()]


def test_qemu_argv_uses_kvm_overlay_and_host_forwards(tmp_path: Path) -> None:
    provider = QemuProvider(
        QemuProviderConfig(
            firmware=Path("/fw/OVMF.fd"), memory_mb=8192, cpus=2, extra_args=["-snapshot"]
        )
    )
    argv = provider.qemu_argv(
        "d-1", Path("/s/d-1/overlay.qcow2"), port=41000, cdp_port=41001, vnc_port=5907, kvm=True
    )
    joined = " ".join(argv)
    assert argv[0] == "qemu-system-x86_64" and argv[-1] == "-snapshot"
    assert "-enable-kvm -cpu host" in joined and "-bios /fw/OVMF.fd" in joined
    assert "-m 8192" in joined and "-smp 2" in joined
    assert "file=/s/d-1/overlay.qcow2,if=virtio,format=qcow2" in joined
    assert (
        "user,id=net0,hostfwd=tcp:127.0.0.1:41000-:5000,hostfwd=tcp:127.0.0.1:41001-:9222"
    ) in joined
    assert "-vnc 127.0.0.1:7" in joined
    emulated = provider.qemu_argv("d-1", Path("/o"), port=1, cdp_port=2, vnc_port=None, kvm=False)
    assert "-enable-kvm" not in emulated and "-vnc" not in emulated
    assert overlay_argv(Path("/b.qcow2"), Path("/o.qcow2")) == [
        "qemu-img",
        "create",
        "-q",
        "-f",
        "qcow2",
        "-b",
        "/b.qcow2",
        "-F",
        "qcow2",
        "/o.qcow2",
    ]


async def test_lifecycle_overlay_is_discarded_on_reset(
    tmp_path: Path, fake_qemu: Path, base_image: Path
) -> None:
    provider = QemuProvider(config(tmp_path, base_image, kvm="off"))
    try:
        handle = await provider.start("d-1")
        overlay = Path(handle.info["overlay"])
        assert qemu_info(overlay)["backing-filename"] == str(base_image)
        assert await provider.health(handle)
        assert [h.id for h in await provider.list()] == ["d-1"]
        with pytest.raises(DesktopError, match="already running"):
            await provider.start("d-1")

        # a write of the guest lands in the overlay; the reset must throw it away
        guest_write(overlay)
        assert compare(base_image, overlay) == 1
        before = QemuRecord.load(tmp_path / "vms" / "d-1")
        new = await provider.reset(handle)
        after = QemuRecord.load(tmp_path / "vms" / "d-1")
        assert before and after and after.pid != before.pid
        assert new.url == handle.url, "a reset keeps the forwarded port"
        assert compare(base_image, overlay) == 0, "the reset overlay must equal the base"
        assert await provider.health(new)
        assert len(calls(fake_qemu)) == 2

        await provider.stop(new)
        assert not (tmp_path / "vms" / "d-1").exists()
        assert await provider.list() == [] and not await provider.health(new)
        await provider.stop(new)  # idempotent
    finally:
        await provider.close()


async def test_qemu_that_exits_fails_with_its_log_and_leaves_nothing(
    tmp_path: Path, fake_qemu: Path, base_image: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_QEMU_MODE", "crash")
    provider = QemuProvider(config(tmp_path, base_image))
    with pytest.raises(DesktopError, match="(?s)exited with 1.*Could not open backing file"):
        await provider.start("d-2")
    assert not (tmp_path / "vms" / "d-2").exists()
    await provider.close()


async def test_missing_qemu_and_missing_image_are_clear_errors(
    tmp_path: Path, base_image: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(DesktopError, match=r"(?s)nowhere\.qcow2 not found.*huggingface"):
        await QemuProvider(config(tmp_path, tmp_path / "nowhere.qcow2")).start("d-1")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(DesktopError, match="`qemu-system-x86_64` not found on PATH; apt-get"):
        await QemuProvider(config(tmp_path, base_image)).start("d-1")


def test_our_image_boots_its_kernel_with_the_token_and_restricted_network(tmp_path: Path) -> None:
    disk = tmp_path / "disk.qcow2"
    for name in ("disk.qcow2", "vmlinuz", "initrd.img"):
        (tmp_path / name).write_bytes(b"")
    provider = QemuProvider(QemuProviderConfig(image=disk, firmware=None))
    boot = provider.boot_files(disk)
    assert boot == (tmp_path / "vmlinuz", tmp_path / "initrd.img")
    argv = provider.qemu_argv(
        "d-1",
        tmp_path / "o.qcow2",
        port=41000,
        cdp_port=41001,
        vnc_port=None,
        kvm=False,
        boot=boot,
        token="tok",
        qmp=tmp_path / "qmp.sock",
    )
    append = argv[argv.index("-append") + 1]
    assert "init=/usr/local/bin/cua-desktop" in append and "cua_guest_token=tok" in append
    assert argv[argv.index("-kernel") + 1] == str(tmp_path / "vmlinuz")
    assert "-bios" not in argv
    assert argv[argv.index("-netdev") + 1].endswith(",restrict=on")
    assert f"unix:{tmp_path / 'qmp.sock'},server=on,wait=off" in argv
    (tmp_path / "vmlinuz").unlink()
    assert provider.boot_files(disk) is None  # OSWorld's image: its own boot loader


def test_qemu_started_as_root_drops_to_the_desktop_account(monkeypatch: pytest.MonkeyPatch) -> None:
    """A VM that breaks out of its emulator must not hold root: as root, QEMU gets
    `-runas` (the `user` account with run_as auto, or the one named), never as others."""
    import pwd

    from cua_rl.desktop.providers.qemu import provider as qemu_module

    accounts = {"user", "kiosk"}

    def getpwnam(name: str) -> object:
        if name not in accounts:
            raise KeyError(name)
        return object()

    monkeypatch.setattr(pwd, "getpwnam", getpwnam)
    monkeypatch.setattr(qemu_module.os, "geteuid", lambda: 0)
    auto = QemuProvider(QemuProviderConfig(firmware=None))
    assert auto.run_as() == "user"
    argv = auto.qemu_argv(
        "d-1", Path("/o"), port=1, cdp_port=2, vnc_port=None, kvm=False, run_as=auto.run_as()
    )
    assert argv[argv.index("-runas") + 1] == "user"
    assert QemuProvider(QemuProviderConfig(firmware=None, run_as="kiosk")).run_as() == "kiosk"
    assert QemuProvider(QemuProviderConfig(firmware=None, run_as=None)).run_as() is None
    with pytest.raises(DesktopError, match="run_as account 'nobody-here' does not exist"):
        QemuProvider(QemuProviderConfig(firmware=None, run_as="nobody-here")).run_as()
    accounts.clear()
    assert auto.run_as() is None  # auto without the account: root, with a warning
    monkeypatch.setattr(qemu_module.os, "geteuid", lambda: 1000)
    assert QemuProvider(QemuProviderConfig(firmware=None, run_as="kiosk")).run_as() is None
    assert "-runas" not in auto.qemu_argv(
        "d-1", Path("/o"), port=1, cdp_port=2, vnc_port=None, kvm=False
    )


def test_the_kvm_probe_runs_once_per_machine_boot(tmp_path: Path) -> None:
    """Where KVM hangs the probe costs its whole deadline; its answer is kept for the
    machine's boot, per kernel, so later processes do not pay it again."""
    from cua_rl.desktop.providers.qemu.kvm import kvm_boots

    runs = tmp_path / "runs"
    fake = tmp_path / "qemu-kvm"
    fake.write_text(
        f"#!/bin/sh\necho run >> {runs}\n"
        "[ -n \"$KVM_WORKS\" ] && echo 'Linux version 6.1' && exit 0\nexec sleep 30\n"
    )
    fake.chmod(0o755)
    kernel, initrd, cache = tmp_path / "vmlinuz", tmp_path / "initrd.img", tmp_path / "c.json"
    kernel.write_bytes(b"k")
    initrd.write_bytes(b"i")
    assert kvm_boots(str(fake), kernel, initrd, 0.5, cache=cache) is False  # hangs: deadline
    assert kvm_boots(str(fake), kernel, initrd, 0.5, cache=cache) is False
    assert runs.read_text().split() == ["run"]  # the second answer came from the cache
    kernel.write_bytes(b"another kernel")  # a new kernel file is probed again
    os.environ["KVM_WORKS"] = "1"
    try:
        assert kvm_boots(str(fake), kernel, initrd, 5, cache=cache) is True
    finally:
        del os.environ["KVM_WORKS"]
    assert runs.read_text().split() == ["run", "run"]
    cache.write_text("{not json")  # a damaged cache is probed again, not trusted
    assert kvm_boots(str(fake), kernel, initrd, 0.5, cache=cache) is False
    assert len(runs.read_text().split()) == 3


def test_the_disk_goes_to_qemu_as_an_fd_set() -> None:
    """forks.fdset_argv: the drive's path becomes /dev/fdset/1, one -add-fd per
    descriptor, right after the executable (QEMU reads them before -drive)."""
    from cua_rl.desktop.providers.qemu.forks import fdset_argv

    argv = [
        "qemu-system-x86_64",
        "-m",
        "1024",
        "-drive",
        "file=/s/d/overlay.qcow2,if=virtio,format=qcow2",
        "-display",
        "none",
    ]
    out = fdset_argv(argv, Path("/s/d/overlay.qcow2"), (7, 8))
    assert out == [
        "qemu-system-x86_64",
        "-add-fd",
        "fd=7,set=1",
        "-add-fd",
        "fd=8,set=1",
        "-m",
        "1024",
        "-drive",
        "file=/dev/fdset/1,if=virtio,format=qcow2",
        "-display",
        "none",
    ]
    with pytest.raises(DesktopError, match="no -drive"):
        fdset_argv(argv, Path("/elsewhere.qcow2"), (7, 8))
