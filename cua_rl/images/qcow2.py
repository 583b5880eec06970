"""The qcow2 format: the image's root file system as an ext4 disk, plus Debian's
kernel and initrd beside it, booted directly by QEMU (`-kernel/-initrd`, no boot
loader) with the session script as init (`init=/usr/local/bin/cua-desktop`)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from cua_rl.errors import DesktopError

DISK_SLACK_MB = 1024
"""Free space on the disk for the user's files and logs (the tree's size plus this)."""


def _run(argv: list[str], what: str) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise DesktopError(
            f"image build: {what} failed (exit {proc.returncode}): "
            f"{(proc.stdout + proc.stderr).strip()[-2000:]}"
        )


def make_qcow2(rootfs_tar: Path, out_dir: Path) -> None:
    """rootfs.tar -> out_dir/disk.qcow2 (ext4, no partition table) + vmlinuz + initrd.img."""
    for tool in ("mkfs.ext4", "qemu-img"):
        if shutil.which(tool) is None:
            raise DesktopError(
                f"image build: `{tool}` not found (apt-get install e2fsprogs qemu-utils)"
            )
    with tempfile.TemporaryDirectory(dir=out_dir, prefix="qcow2-") as tmp:
        root, raw = Path(tmp) / "root", Path(tmp) / "disk.raw"
        root.mkdir()
        _run(
            ["tar", "--numeric-owner", "-xpf", str(rootfs_tar), "-C", str(root)],
            "unpacking the root file system",
        )
        kernels = sorted((root / "boot").glob("vmlinuz-*"))
        initrds = sorted((root / "boot").glob("initrd.img-*"))
        if not kernels or not initrds:
            raise DesktopError(
                "image build: the qcow2 tree has no /boot/vmlinuz-* and "
                "initrd.img-* (linux-image-amd64 missing from the recipe?)"
            )
        shutil.copyfile(kernels[-1], Path(tmp) / "vmlinuz")
        shutil.copyfile(initrds[-1], Path(tmp) / "initrd.img")
        used_mb = (
            sum(f.stat().st_size for f in root.rglob("*") if f.is_file() and not f.is_symlink())
            // 2**20
        )
        _run(
            [
                "mkfs.ext4",
                "-q",
                "-L",
                "cua-root",
                "-d",
                str(root),
                "-E",
                "root_owner=0:0",
                str(raw),
                f"{used_mb + DISK_SLACK_MB}M",
            ],
            "mkfs.ext4 -d",
        )
        _run(
            [
                "qemu-img",
                "convert",
                "-q",
                "-f",
                "raw",
                "-O",
                "qcow2",
                str(raw),
                str(Path(tmp) / "disk.qcow2"),
            ],
            "qemu-img convert",
        )
        for name in ("vmlinuz", "initrd.img", "disk.qcow2"):  # disk last: it marks done
            (Path(tmp) / name).replace(out_dir / name)
