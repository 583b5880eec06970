"""The home every local desktop starts from: a template directory built once per
state dir and copied over a desktop's /home/user on every reset.

It holds what OSWorld's Ubuntu image has in a fresh home that the apps would not
make themselves (`images.home_files`, which images build their home from too: the
XDG folders, LibreOffice past its first-run dialogs, VS Code's user directory and
PulseAudio's starting volume) and the image's default apps (`images.default_apps`).
A template built by an older version gains what it lacks.
"""

from __future__ import annotations

import os
import secrets
import shutil
from pathlib import Path

from cua_rl.images.default_apps import DEFAULT_GROUP, default_apps_list
from cua_rl.images.home_files import (
    PULSE_CONFIG,
    PULSE_DEFAULT_PA,
    VSCODE_USER_DIR,
    write_home_files,
)

__all__ = [
    "PULSE_CONFIG",
    "PULSE_DEFAULT_PA",
    "ensure_home_template",
    "merged_apps_list",
    "restore_home",
]


def merged_apps_list(existing: str | None, ours: str) -> str | None:
    """`existing` plus our defaults for the types it does not set (a user's choice
    in a template stands), inserted under its `[Default Applications]` group; None
    when nothing is missing."""
    if existing is None:
        return ours
    have = {line.partition("=")[0].strip() for line in existing.splitlines() if "=" in line}
    missing = [line for line in ours.splitlines()[1:] if line.partition("=")[0] not in have]
    if not missing:
        return None
    lines = existing.splitlines()
    if DEFAULT_GROUP in lines:
        at = lines.index(DEFAULT_GROUP) + 1
        return "\n".join([*lines[:at], *missing, *lines[at:]]) + "\n"
    return "\n".join([*lines, DEFAULT_GROUP, *missing]) + "\n"


def _write_default_apps(home: Path) -> None:
    """Write `.config/mimeapps.list` into a template (atomically), or add to the one
    it has the defaults it lacks (`merged_apps_list`)."""
    target = home / ".config" / "mimeapps.list"
    if (ours := default_apps_list()) is None:
        return
    existing = target.read_text(encoding="utf-8", errors="replace") if target.exists() else None
    if (content := merged_apps_list(existing, ours)) is not None:
        _write_file(target, content)


def _write_pulse_config(home: Path) -> None:
    """Write `PULSE_DEFAULT_PA` unless the template has a PulseAudio config already."""
    if not (home / PULSE_CONFIG).exists():
        _write_file(home / PULSE_CONFIG, PULSE_DEFAULT_PA)


def _write_file(target: Path, text: str) -> None:
    """Write a template's file atomically (a desktop starting meanwhile copies the
    old file or the new one, never half of it)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}")
    tmp.write_text(text)
    tmp.rename(target)


def ensure_home_template(path: Path) -> Path:
    """Build the default template at `path` unless it exists (atomic rename, so
    concurrent first starts never see half a template). A template built before the
    default-apps list, the PulseAudio config or VS Code's user directory gains what
    it lacks."""
    if path.is_dir():
        (path / VSCODE_USER_DIR).mkdir(parents=True, exist_ok=True)
        _write_default_apps(path)
        _write_pulse_config(path)
        return path
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    tmp.mkdir()
    write_home_files(tmp)  # the folders, LibreOffice's registry, PulseAudio's config
    _write_default_apps(tmp)
    try:
        tmp.rename(path)
    except OSError:  # another process built it first
        shutil.rmtree(tmp, ignore_errors=True)
    return path


def restore_home(template: Path, home: Path) -> None:
    """Replace `home` with a copy of `template` (symlinks kept as links)."""
    if home.exists():
        shutil.rmtree(home)
    shutil.copytree(template, home, symlinks=True)
