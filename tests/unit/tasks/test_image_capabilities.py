"""What this project's image offers OSWorld's tasks (issue 50): the local desktops'
session on the image's packages, whichever provider runs it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cua_rl.desktop.file_cache import FileCache
from cua_rl.desktop.providers.container.config import ContainerProviderConfig
from cua_rl.desktop.providers.qemu.config import QemuProviderConfig
from cua_rl.images.manifests import find_manifest, installed_packages, profile_of
from cua_rl.tasks.capabilities import capabilities_for, image_capabilities, local_gaps
from cua_rl.tasks.preflight import preflight
from cua_rl.types import TaskVariant


def _task(task_id: str, command: str, domain: str = "os") -> TaskVariant:
    return TaskVariant(
        task_id=task_id,
        domain=domain,
        evaluator_name="default",
        instruction="x",
        config=({"type": "execute", "parameters": {"command": command, "shell": True}},),
        evaluator={"func": "infeasible"},
    )


def test_the_full_image_has_what_local_desktops_have(tmp_path: Path) -> None:
    host = image_capabilities("container", "full")
    for app in ("google-chrome", "code", "gnome-terminal", "gedit", "libreoffice", "vlc", "socat"):
        assert host.has_app(app), app
    assert not host.root and host.gaps == local_gaps()
    tasks = [
        _task("jq", "echo password | sudo -S apt install jq -y"),
        _task("mkdir", "echo password | sudo -S mkdir ~/Desktop/todo"),
        _task("pip", "echo password | sudo -S pip install numpy"),
        _task("chrome", "google-chrome --remote-debugging-port=1337", "chrome"),
        _task("code", "code ~/project", "vs_code"),
    ]
    check = preflight(tasks, host, FileCache(tmp_path))
    assert check.runnable == ["jq", "mkdir", "chrome", "code"]
    assert check.not_runnable == {"needs_root": ["pip"]}


def test_the_minimal_image_runs_os_tasks_but_has_no_apps(tmp_path: Path) -> None:
    host = image_capabilities("container", "minimal")
    assert not host.has_app("code") and not host.has_app("google-chrome")
    assert "code-server" in host.missing_why["code"]
    tasks = [
        _task("xsel", "echo password | sudo -S apt install xsel"),
        _task("gimp", "echo password | sudo -S apt install gimp"),
        _task("code", "code ~/project", "vs_code"),
    ]
    check = preflight(tasks, host, FileCache(tmp_path))
    assert check.runnable == ["xsel"]
    assert (
        check.details["gimp"] == "needs_root: sudo apt install of package(s) the desktop "
        "lacks: gimp"
    )
    assert check.not_runnable["unsupported_app:code"] == ["code"]


def _built(cache: Path, content: str, profile: str, debian: dict[str, str]) -> Path:
    folder = cache / content
    folder.mkdir(parents=True)
    manifest: dict[str, Any] = {
        "content_hash": content,
        "recipe": {"profile": profile},
        "debian": debian,
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))
    (folder / "vmlinuz").write_bytes(b"")
    return folder


def test_an_images_manifest_is_found_from_its_tag_or_disk(tmp_path: Path) -> None:
    content = "ab12" * 16
    folder = _built(tmp_path, content, "minimal", {"jq": "1.6", "xsel": "1.2"})
    by_tag = find_manifest(f"cua-rl-desktop:{content[:16]}", tmp_path)
    assert by_tag is not None and by_tag == find_manifest(folder / "disk.qcow2", tmp_path)
    assert profile_of("anything", by_tag) == "minimal"
    assert installed_packages("minimal", by_tag) == {"jq", "xsel"}
    assert find_manifest("cua-rl-desktop:full", tmp_path) is None
    assert profile_of("cua-rl-desktop:full", None) == "full"
    assert find_manifest("ubuntu:22.04", tmp_path) is None
    assert "xterm" in installed_packages("minimal", None)  # the recipe's list


def test_capabilities_follow_the_image_a_provider_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUA_RL_IMAGE_CACHE", str(tmp_path))
    content = "cd34" * 16
    folder = _built(tmp_path, content, "minimal", {"jq": "1.6"})
    sudo_jq = "echo password | sudo -S apt install jq"
    container = capabilities_for(ContainerProviderConfig(image=f"cua-rl-desktop:{content[:16]}"))
    assert not container.root and container.sudo_problem is not None
    assert container.sudo_problem(sudo_jq) is None
    assert container.sudo_problem("sudo apt install xsel") is not None  # not in its manifest
    ours = capabilities_for(QemuProviderConfig(image=folder / "disk.qcow2"))
    assert ours.provider == "qemu" and not ours.root and not ours.has_app("gimp")
    osworld = capabilities_for(QemuProviderConfig(image=tmp_path / "Ubuntu.qcow2"))
    assert osworld.root and osworld.has_app("gimp")  # OSWorld's own image
