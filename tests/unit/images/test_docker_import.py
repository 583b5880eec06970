"""`docker import` failures: docker's own words in one DesktopError, no tag left.

The `docker` here is a fake executable on PATH (the engine is the boundary):
it logs its arguments and plays a daemon that dies or refuses."""

from __future__ import annotations

import os
import stat
import tarfile
from pathlib import Path

import pytest

from cua_rl.errors import DesktopError
from cua_rl.images.docker import docker_import, docker_tag

FAKE = """#!/bin/sh
echo "$*" >> "{log}"
case "$1 $2" in
  "image inspect") exit 1 ;;
  "image rm") exit 0 ;;
esac
case "$1" in
  import) {on_import} ;;
  tag) echo "Error response from daemon: No such image" >&2; exit 1 ;;
esac
exit 0
"""


def _fake_docker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, on_import: str) -> Path:
    bin_dir, log = tmp_path / "bin", tmp_path / "docker.log"
    bin_dir.mkdir()
    script = bin_dir / "docker"
    script.write_text(FAKE.format(log=log, on_import=on_import))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return log


def _rootfs(tmp_path: Path) -> Path:
    """A tar far larger than a pipe's buffer, so an early exit breaks the pipe."""
    big = tmp_path / "big"
    big.write_bytes(os.urandom(4 * 2**20))
    tar_path = tmp_path / "rootfs.tar"
    with tarfile.open(tar_path, "w") as tar:
        tar.add(big, arcname="./usr/share/big")
    return tar_path


def test_a_daemon_that_dies_mid_import_gives_its_stderr_and_leaves_no_tag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = _fake_docker(
        tmp_path,
        monkeypatch,
        'echo "Cannot connect to the Docker daemon at '
        'unix:///var/run/docker.sock. Is the docker daemon running?" >&2; exit 1',
    )
    content = "ab" * 32
    with pytest.raises(DesktopError) as caught:
        docker_import(_rootfs(tmp_path), content, "minimal")
    message = str(caught.value)
    assert "\n" not in message
    assert f"`docker import - {docker_tag(content)}` failed (exit 1" in message
    assert "Cannot connect to the Docker daemon" in message and "stopped reading" in message
    calls = log.read_text().splitlines()
    assert f"image rm --force {docker_tag(content)}" in calls
    assert not any(call.startswith("tag ") for call in calls)


def test_an_import_that_reads_everything_then_fails_is_reported_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = _fake_docker(
        tmp_path,
        monkeypatch,
        'cat >/dev/null; echo "write /var/lib/docker: no space left" >&2; exit 1',
    )
    with pytest.raises(DesktopError, match="no space left") as caught:
        docker_import(_rootfs(tmp_path), "cd" * 32, "minimal")
    assert "stopped reading" not in str(caught.value)
    assert f"image rm --force {docker_tag('cd' * 32)}" in log.read_text()


def test_a_failed_profile_tag_removes_the_fresh_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = _fake_docker(tmp_path, monkeypatch, "cat >/dev/null; exit 0")
    with pytest.raises(DesktopError, match="docker tag .* No such image"):
        docker_import(_rootfs(tmp_path), "ef" * 32, "minimal")
    assert f"image rm --force {docker_tag('ef' * 32)}" in log.read_text()


def test_no_docker_on_path_is_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(DesktopError, match="`docker` not found"):
        docker_import(_rootfs(tmp_path), "01" * 32, "minimal")
