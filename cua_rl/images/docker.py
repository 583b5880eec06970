"""The docker format: `docker import` of an image's root file system.

Docker's own stderr is what says why an import failed (no daemon, disk full),
so it is kept and reported, and a failed import leaves no tag behind.
"""

from __future__ import annotations

import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import IO

from cua_rl.errors import DesktopError
from cua_rl.images import recipe as rc

DOCKER_REPO = "cua-rl-desktop"
IMPORT_TIMEOUT_S = 1800.0
VM_ONLY = ("boot/", "usr/lib/modules/", "lib/modules/")
VM_ONLY_FILES = ("vmlinuz", "initrd.img", "vmlinuz.old", "initrd.img.old")


def docker_tag(content: str) -> str:
    return f"{DOCKER_REPO}:{content[:16]}"


def docker_has(tag: str) -> bool:
    try:
        return (
            subprocess.run(
                ["docker", "image", "inspect", tag], capture_output=True, timeout=60
            ).returncode
            == 0
        )
    except FileNotFoundError:
        raise DesktopError("image build: `docker` not found (apt-get install docker.io)") from None


def _container_tree(rootfs_tar: Path, out: IO[bytes]) -> None:
    """Stream the root file system without what only a VM boots (kernel, initrd,
    modules): a container runs on the host's kernel."""
    with tarfile.open(rootfs_tar) as src, tarfile.open(fileobj=out, mode="w|") as dst:
        for member in src:
            name = member.name.removeprefix("./")
            if name.startswith(VM_ONLY) or name in VM_ONLY_FILES:
                continue
            dst.addfile(member, src.extractfile(member) if member.isfile() else None)


def _remove_tag(tag: str) -> None:
    """Best effort: the engine may be the reason the import failed."""
    try:
        subprocess.run(["docker", "image", "rm", "--force", tag], capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        pass


def _one_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return " | ".join(lines[-3:])[-1000:] or "(no output)"


def _import(rootfs_tar: Path, content: str, tag: str) -> None:
    changes = [
        f'ENTRYPOINT ["{rc.SESSION_SCRIPT_IN_IMAGE}"]',
        f"USER {rc.USER}",
        f"WORKDIR /home/{rc.USER}",
        "ENV CUA_RUN_DIR=/run/cua",
        f"LABEL cua-rl.image={content}",
        f"LABEL cua-rl.uid={rc.UID}",
    ]
    argv = ["docker", "import", *(a for c in changes for a in ("--change", c)), "-", tag]
    with tempfile.TemporaryFile() as err:  # a file: a full pipe cannot stall the import
        try:
            proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err
            )
        except FileNotFoundError:
            raise DesktopError(
                "image build: `docker` not found (apt-get install docker.io)"
            ) from None
        assert proc.stdin is not None
        broken = False
        try:
            try:
                _container_tree(rootfs_tar, proc.stdin)
            except BrokenPipeError:  # docker exited early: its exit code and stderr say why
                broken = True
            finally:
                try:
                    proc.stdin.close()
                except BrokenPipeError:
                    broken = True
            proc.wait(timeout=IMPORT_TIMEOUT_S)
        except BaseException:  # timeout, interrupt, a bad tar: no import left running
            proc.kill()
            proc.wait()
            raise
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    if proc.returncode != 0 or broken:
        raise DesktopError(
            f"image build: `docker import - {tag}` failed "
            f"(exit {proc.returncode}"
            f"{', it stopped reading the tar' if broken else ''}): "
            f"{_one_line(stderr)}"
        )


def docker_import(rootfs_tar: Path, content: str, profile: str) -> str:
    """`docker import` the rootfs tar as `cua-rl-desktop:<hash[:16]>` (also tagged
    with the profile); the entry point and user come with it. Any failure
    removes the tag, so a later build never mistakes a partial import for done."""
    tag = docker_tag(content)
    if docker_has(tag):
        imported = False
    else:
        imported = True
        try:
            _import(rootfs_tar, content, tag)
        except BaseException:
            _remove_tag(tag)
            raise
    proc = subprocess.run(
        ["docker", "tag", tag, f"{DOCKER_REPO}:{profile}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if proc.returncode != 0:
        if imported:
            _remove_tag(tag)
        raise DesktopError(
            f"image build: `docker tag {tag} {DOCKER_REPO}:{profile}` failed "
            f"(exit {proc.returncode}): {_one_line(proc.stderr)}"
        )
    return tag
