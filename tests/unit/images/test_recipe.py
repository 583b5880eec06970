"""The image recipe: package lists, the guest's pinned closure, and the keys."""

from __future__ import annotations

import os
import subprocess
from dataclasses import replace
from pathlib import Path

from cua_rl.images import recipe as rc
from cua_rl.images.base_build import write_default_apps
from cua_rl.images.build import content_hash


def test_profiles_nest_and_carry_a_kernel_for_vms() -> None:
    minimal, full = rc.packages("minimal"), rc.packages("full")
    assert set(minimal) < set(full) and minimal == sorted(minimal)
    assert {"xvfb", "openbox", "python3", "linux-image-amd64"} <= set(minimal)


def test_python_closure_pins_the_guest_dependencies_for_the_image() -> None:
    pins = rc.python_closure()
    assert {"aiohttp", "pyautogui", "pillow", "mss"} <= pins.keys()
    assert "cua-guest" not in pins
    assert all(version[0].isdigit() for version in pins.values())


def test_markers_are_evaluated_for_linux_cpython_311() -> None:
    assert rc._requirement_name('pywin32; sys_platform == "win32"') is None
    assert rc._requirement_name('pytest; extra == "test"') is None
    assert rc._requirement_name('python3-xlib; platform_system == "Linux"') == "python3-xlib"


def test_recipe_key_changes_with_any_input() -> None:
    base = rc.Recipe(profile="minimal", packages=["a"], python={"x": "1"})
    assert base.key() == replace(base).key()
    for changed in (
        replace(base, packages=["a", "b"]),
        replace(base, python={"x": "2"}),
        replace(base, guest_digest="g"),
        replace(base, version=99),
    ):
        assert changed.key() != base.key()


def test_content_hash_covers_resolved_versions() -> None:
    one = content_hash("k", {"libc6": "2.36-9"}, {"aiohttp": "3.9"})
    assert one == content_hash("k", {"libc6": "2.36-9"}, {"aiohttp": "3.9"})
    assert one != content_hash("k", {"libc6": "2.36-10"}, {"aiohttp": "3.9"})


def test_session_script_is_valid_sh() -> None:
    proc = subprocess.run(["sh", "-n"], input=rc.session_script(), text=True, capture_output=True)
    assert proc.returncode == 0, proc.stderr


def test_full_profile_has_osworlds_default_video_player_and_pdf_viewer() -> None:
    assert {"totem", "evince"} <= set(rc.packages("full"))
    assert not {"totem", "evince"} & set(rc.packages("minimal"))


def test_the_image_user_gets_totem_and_evince_as_defaults(tmp_path: Path) -> None:
    apps = tmp_path / "usr" / "share" / "applications"
    apps.mkdir(parents=True)
    (apps / "org.gnome.Totem.desktop").write_text(
        "[Desktop Entry]\nMimeType=audio/x-wav;video/mp4;\n"
    )
    (apps / "org.gnome.Evince.desktop").write_text(
        "[Desktop Entry]\nMimeType=application/pdf;image/tiff;\n"
    )
    owner = (os.getuid(), os.getgid())
    written = write_default_apps(tmp_path, owner=owner)
    assert written == tmp_path / "home" / rc.USER / ".config" / "mimeapps.list"
    assert written.read_text() == (
        "[Default Applications]\nvideo/mp4=org.gnome.Totem.desktop\n"
        "application/pdf=org.gnome.Evince.desktop\n"
    )
    assert (written.stat().st_uid, written.stat().st_gid) == owner


def test_an_image_without_those_apps_gets_no_default_apps_list(tmp_path: Path) -> None:
    (tmp_path / "usr" / "share" / "applications").mkdir(parents=True)
    assert write_default_apps(tmp_path) is None
    assert not (tmp_path / "home").exists()


def test_the_guest_digest_ignores_caches_and_pips_build_output(tmp_path: Path) -> None:
    """A local desktop's guest venv is a pip install of vm/guest, which leaves build/
    and *.egg-info there: that must not make a new image (issue 50: it did)."""
    (tmp_path / "cua_guest").mkdir()
    (tmp_path / "cua_guest" / "app.py").write_text("x = 1\n")
    before = rc.tree_digest(tmp_path)
    for rel in (
        "build/lib/cua_guest/app.py",
        "cua_guest.egg-info/PKG-INFO",
        "cua_guest/__pycache__/app.cpython-311.pyc",
    ):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("generated")
    assert rc.tree_digest(tmp_path) == before
    (tmp_path / "cua_guest" / "app.py").write_text("x = 2\n")
    assert rc.tree_digest(tmp_path) != before
