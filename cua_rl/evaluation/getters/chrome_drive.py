"""Google Drive access for the `googledrive` setup step and the `googledrive_file`
getter, with OSWorld's semantics (PyDrive, authorised by a `settings_file`).

These need the task owner's Google credentials and the network. A settings file
that does not exist, or PyDrive missing, raises ChromeRequirementMissing naming
what is missing; a Drive file that cannot be found gives None, as in OSWorld
(the metric then scores 0).
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from pathlib import Path
from typing import Any

from cua_rl.errors import ChromeRequirementMissing
from cua_rl.evaluation.registry import GetterContext, getter

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
    return [f"title = '{name}' and mimeType = '{FOLDER_MIME}' and trashed = false"
            if i < len(parts) - 1 else f"title = '{name}' and trashed = false"
            for i, name in enumerate(parts)]


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


def _fetch(drive: Any, config: dict[str, Any], cache_dir: Path) -> Any:
    if "query" in config:
        return download(drive, config["query"], cache_dir / config["dest"])
    if "path" in config:
        return download(drive, path_query(config["path"]), cache_dir / config["dest"])
    lists = config.get("query_list") or [path_query(p) for p in config["path_list"]]
    return [download(drive, queries, cache_dir / dest)
            for queries, dest in zip(lists, config["dest"], strict=True)]


def _check(config: dict[str, Any]) -> list[tuple[str, str]]:
    keys = [k for k in ("query", "path", "query_list", "path_list") if k in config]
    if len(keys) != 1:
        return [("", "exactly one of query, path, query_list, path_list")]
    if keys[0].endswith("_list") and not (
        isinstance(config[keys[0]], list) and isinstance(config["dest"], list)
        and len(config[keys[0]]) == len(config["dest"])
    ):
        return [(".dest", f"an array aligned with {keys[0]}")]
    return []


@getter("googledrive_file", required=("dest",), check=_check)
async def googledrive_file(ctx: GetterContext, config: dict[str, Any]) -> Any:
    """Download file(s) from Google Drive into the trajectory folder."""
    root = ctx.setup.local_root if ctx.setup is not None else None
    settings = resolve_settings(config.get("settings_file", DEFAULT_SETTINGS), root,
                                what="googledrive_file")
    drive = await asyncio.to_thread(drive_for, settings, what="googledrive_file")
    return await asyncio.to_thread(_fetch, drive, config, ctx.cache_dir)
