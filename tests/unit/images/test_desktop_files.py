"""What an image gets so its desktops match local ones (issue 50): the desktop's own
commands, openbox's keys, Chromium as `chrome`, the home, and one code-server build
script for local desktops and images alike."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from cua_rl.images import desktop_files
from cua_rl.images import recipe as rc
from cua_rl.images.chrome_launcher import IMAGE_CHROME_EXE
from cua_rl.images.code_server import build_script, tree_key
from cua_rl.images.home_files import LO_REGISTRY_FILE, PULSE_CONFIG, write_home_files
from cua_rl.images.openbox_keys import OPENBOX_KEYS, with_keys
from cua_rl.images.sudo_script import SUDO_SCRIPT
from cua_rl.images.vscode_script import CODE_SERVER_MOUNT, CODE_SERVER_NODE, CODE_SERVER_VERSION

ROOT = Path(__file__).resolve().parents[3]
RC_XML = '<openbox_config><keyboard><keybind key="A-F4"/></keyboard></openbox_config>'


def commands(profile: rc.Profile) -> tuple[list[str], bool]:
    """(packages, code-server) of a profile's image: what its commands depend on."""
    return rc.packages(profile), profile in rc.CODE_SERVER_PROFILES


def test_both_profiles_have_the_tools_osworlds_setups_install_and_a_sound_sink() -> None:
    for profile in ("minimal", "full"):
        assert {"jq", "unzip", "sysstat", "xsel", "pulseaudio", "pulseaudio-utils"} <= set(
            rc.packages(profile)
        ), profile
    assert "ripgrep" in rc.packages("full") and rc.CODE_SERVER_PROFILES == ("full",)


def test_the_desktops_commands_follow_the_profile(tmp_path: Path) -> None:
    full, minimal = (
        desktop_files.bin_scripts(*commands("full")),
        desktop_files.bin_scripts(*commands("minimal")),
    )
    assert set(full) == {"sudo", "google-chrome", "code"} and set(minimal) == {"sudo"}
    assert full["sudo"] == SUDO_SCRIPT
    assert f"exec {IMAGE_CHROME_EXE} " in full["google-chrome"]
    assert f"CHROME_WRAPPER={rc.BIN_IN_IMAGE}/google-chrome" in full["google-chrome"]
    assert f"root={CODE_SERVER_MOUNT}\n" in full["code"]
    where = desktop_files.stage_bin(tmp_path, *commands("full"))
    assert where == tmp_path / rc.BIN_IN_IMAGE.lstrip("/")
    assert all(os.access(where / name, os.X_OK) for name in full)
    assert os.readlink(where / "python") == "/usr/bin/python3"
    for name, text in full.items():  # each one a valid script of its shell
        shell = "bash" if text.startswith("#!/bin/bash") else "sh"
        done = subprocess.run([shell, "-n"], input=text, text=True, capture_output=True)
        assert done.returncode == 0, (name, done.stderr)


def test_the_recipe_key_covers_the_desktops_commands() -> None:
    """An edit of a command (a top-layer file) must give a new image, not a cached one."""
    full = rc.Recipe.for_profile("full")
    assert full.code_server == tree_key(rc.SUITE) and full.script_digest
    assert rc.Recipe.for_profile("minimal").code_server == ""
    assert full.base_key() != replace(full, code_server="other").base_key()
    assert full.key() != replace(full, script_digest="other").key()


def test_the_base_gets_openboxs_ctrl_alt_t_and_chromium_as_chrome(tmp_path: Path) -> None:
    (tmp_path / "etc/xdg/openbox").mkdir(parents=True)
    (tmp_path / "etc/xdg/openbox/rc.xml").write_text(RC_XML)
    chromium = tmp_path / "usr/lib/chromium/chromium"
    chromium.parent.mkdir(parents=True)
    chromium.write_bytes(b"\x7fELF")
    done = desktop_files.patch_base(tmp_path)
    assert len(done) == 2
    patched = (tmp_path / "etc/xdg/openbox/rc.xml").read_text()
    assert patched.count(OPENBOX_KEYS) == 1 and patched.index(OPENBOX_KEYS) < patched.index(
        "</keyboard>"
    )
    chrome = tmp_path / IMAGE_CHROME_EXE.lstrip("/")
    assert os.path.samefile(chrome, chromium) and not chrome.is_symlink()
    assert desktop_files.patch_base(tmp_path) == ["openbox: Ctrl+Alt+T"]  # idempotent
    assert (tmp_path / "etc/xdg/openbox/rc.xml").read_text() == patched
    with pytest.raises(ValueError, match="keyboard"):
        with_keys("<openbox_config/>")


def test_the_home_is_the_local_desktops_home(tmp_path: Path) -> None:
    made = write_home_files(tmp_path)
    for rel in (
        "Desktop",
        "Public",
        "Templates",
        ".config/Code/User",
        str(PULSE_CONFIG),
        str(LO_REGISTRY_FILE),
    ):
        assert (tmp_path / rel).exists() and tmp_path / rel in made, rel
    assert "ShowTipOfTheDay" in (tmp_path / LO_REGISTRY_FILE).read_text()
    assert "set-sink-volume auto_null 26214" in (tmp_path / PULSE_CONFIG).read_text()
    (tmp_path / PULSE_CONFIG).write_text("mine")
    assert write_home_files(tmp_path) == []  # nothing again, a template's own file stands
    assert (tmp_path / PULSE_CONFIG).read_text() == "mine"


def test_one_code_server_build_with_one_version_everywhere() -> None:
    script = build_script()
    assert f'CODE_SERVER_VERSION="{CODE_SERVER_VERSION}"' in script
    assert f'CODE_SERVER_NODE="{CODE_SERVER_NODE}"' in script
    setup = (ROOT / "setup.sh").read_text()
    assert f'CODE_SERVER_VERSION="{CODE_SERVER_VERSION}"' in setup
    assert re.search(r"bash cua_rl/images/code-server\.sh \"\$CODE_SERVER_DIR\"", setup)
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0


def test_the_session_script_is_a_local_desktops_session() -> None:
    script = rc.session_script()
    assert f"PATH={rc.BIN_IN_IMAGE}:" in script
    assert "OSWORLD_BUS=/run/user/1000/bus" in script and 'ln -sfn "$BUS" "$OSWORLD_BUS"' in script
    assert 'dbus-daemon --session --nofork --nopidfile --address="unix:path=$BUS"' in script
    assert "DBUS_SESSION_BUS_ADDRESS=unix:path=$BUS" in script
    for var in ("GNOME_ACCESSIBILITY=1", "SAL_USE_VCLPLUGIN", "LANG="):
        assert var in script, var
    assert "python3 -m cua_guest.fd_forward 4 127.0.0.1 9222" in script
