"""The `googledrive_file` getter: file(s) from the task owner's Google Drive
(Drive access itself is in `cua_rl.chrome.drive`, shared with the setup steps)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from cua_rl.chrome.drive import DEFAULT_SETTINGS, download, drive_for, path_query, resolve_settings
from cua_rl.evaluation.registry import GetterContext, getter


def _fetch(drive: Any, config: dict[str, Any], cache_dir: Path) -> Any:
    if "query" in config:
        return download(drive, config["query"], cache_dir / config["dest"])
    if "path" in config:
        return download(drive, path_query(config["path"]), cache_dir / config["dest"])
    lists = config.get("query_list") or [path_query(p) for p in config["path_list"]]
    return [
        download(drive, queries, cache_dir / dest)
        for queries, dest in zip(lists, config["dest"], strict=True)
    ]


def _check(config: dict[str, Any]) -> list[tuple[str, str]]:
    keys = [k for k in ("query", "path", "query_list", "path_list") if k in config]
    if len(keys) != 1:
        return [("", "exactly one of query, path, query_list, path_list")]
    if keys[0].endswith("_list") and not (
        isinstance(config[keys[0]], list)
        and isinstance(config["dest"], list)
        and len(config[keys[0]]) == len(config["dest"])
    ):
        return [(".dest", f"an array aligned with {keys[0]}")]
    return []


@getter("googledrive_file", required=("dest",), check=_check)
async def googledrive_file(ctx: GetterContext, config: dict[str, Any]) -> Any:
    """Download file(s) from Google Drive into the trajectory folder."""
    root = ctx.setup.local_root if ctx.setup is not None else None
    settings = resolve_settings(
        config.get("settings_file", DEFAULT_SETTINGS), root, what="googledrive_file"
    )
    drive = await asyncio.to_thread(drive_for, settings, what="googledrive_file")
    return await asyncio.to_thread(_fetch, drive, config, ctx.cache_dir)
