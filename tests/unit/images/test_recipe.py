"""The image recipe: package lists, the guest's pinned closure, and the keys."""

from __future__ import annotations

import subprocess
from dataclasses import replace

from cua_rl.images import recipe as rc
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
    for changed in (replace(base, packages=["a", "b"]), replace(base, python={"x": "2"}),
                    replace(base, guest_digest="g"), replace(base, version=99)):
        assert changed.key() != base.key()


def test_content_hash_covers_resolved_versions() -> None:
    one = content_hash("k", {"libc6": "2.36-9"}, {"aiohttp": "3.9"})
    assert one == content_hash("k", {"libc6": "2.36-9"}, {"aiohttp": "3.9"})
    assert one != content_hash("k", {"libc6": "2.36-10"}, {"aiohttp": "3.9"})


def test_session_script_is_valid_sh() -> None:
    proc = subprocess.run(["sh", "-n"], input=rc.session_script(), text=True,
                          capture_output=True)
    assert proc.returncode == 0, proc.stderr
