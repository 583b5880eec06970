"""Google Drive access for the `googledrive` setup step and the `googledrive_file`
getter, with OSWorld's semantics (PyDrive, authorised by a `settings_file`).

These need the task owner's Google credentials and the network. A settings file
that does not exist, or PyDrive missing, raises ChromeRequirementMissing naming
what is missing; a Drive file that cannot be found gives None, as in OSWorld
(the metric then scores 0).
"""

from __future__ import annotations

import importlib
import logging
from pathlib import Path
from typing import Any

from cua_rl.errors import ChromeRequirementMissing

log = logging.getLogger(__name__)

DEFAULT_SETTINGS = "evaluation_examples/settings/googledrive/settings.yml"
FOLDER_MIME = "application/vnd.google-apps.folder"


def resolve_settings(settings_file: str, root: Path | None, *, what: str) -> Path:
    """The settings file on the host (relative paths against `root`, else the cwd)."""
    path = Path(settings_file).expanduser()
    candidates = [path] if path.is_absolute() else [p for p in (root and root / path, path) if p]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise ChromeRequirementMissing(
        f"{what}: settings_file {settings_file!r} does not exist (looked at "
        f"{', '.join(str(c) for c in candidates)}); it holds the Google credentials OSWorld's "
        "Google Drive tasks need, and the network must reach Google"
    )


def drive_for(settings: Path, *, what: str) -> Any:
    """An authorised PyDrive GoogleDrive (pydrive2, else pydrive)."""
    for package in ("pydrive2", "pydrive"):
        try:
            auth = importlib.import_module(f"{package}.auth")
            drive = importlib.import_module(f"{package}.drive")
        except ModuleNotFoundError:
            continue
        return drive.GoogleDrive(auth.GoogleAuth(settings_file=str(settings)))
    raise ChromeRequirementMissing(f"{what} needs PyDrive: pip install pydrive2")


def path_query(parts: list[str]) -> list[str]:
    """Drive search queries walking a folder path down to its last element."""
    return [
        f"title = '{name}' and mimeType = '{FOLDER_MIME}' and trashed = false"
        if i < len(parts) - 1
        else f"title = '{name}' and trashed = false"
        for i, name in enumerate(parts)
    ]


def download(drive: Any, queries: list[str], target: Path) -> str | None:
    """Follow `queries` from the root (each in the previous match's folder), download
    the last match to `target`; None when a step finds nothing."""
    parent, found = "root", None
    try:
        for query in queries:
            matches = drive.ListFile({"q": f'( {query} ) and "{parent}" in parents'}).GetList()
            if not matches:
                return None
            found = matches[0]  # OSWorld takes the first of several candidates too
            parent = found["id"]
        if found is None:
            return None
        target.parent.mkdir(parents=True, exist_ok=True)
        found.GetContentFile(str(target), mimetype=found["mimeType"])
    except Exception as exc:  # PyDrive raises its own errors for API failures
        log.warning("googledrive_file: download failed: %s", exc)
        return None
    return str(target)
