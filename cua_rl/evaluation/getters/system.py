"""Getters for desktop state kept as files: the wallpaper image and values read
out of a desktop file, following OSWorld's `get_vm_wallpaper` (`getters/info.py`)
and `get_content_from_vm_file` (`getters/file.py`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any

from cua_rl.atomic_file import write_bytes_atomic
from cua_rl.eval_libraries import require
from cua_rl.evaluation.getters.apps_config import check_dest, fetch_to_cache
from cua_rl.evaluation.registry import Finding, GetterContext, getter


@getter("vm_wallpaper", required=("dest",), check=check_dest)
async def vm_wallpaper(ctx: GetterContext, config: dict[str, Any]) -> str:
    """The desktop's current wallpaper image, saved under `dest`."""
    data = await ctx.client.wallpaper()
    if not data:
        raise FileNotFoundError("the desktop reports no wallpaper file")
    target = ctx.cache_dir / config["dest"]
    await asyncio.to_thread(write_bytes_atomic, target, data)
    return str(target)


_CONTENT_KINDS = {"xlsx": ("last_row",)}


def _check_content(config: Mapping[str, Any]) -> list[Finding]:
    kind, content = config["file_type"], config["file_content"]
    if kind not in _CONTENT_KINDS:
        return [(".file_type", f"one of {sorted(_CONTENT_KINDS)}, got {kind!r}")]
    if content not in _CONTENT_KINDS[kind]:
        return [(".file_content", f"one of {list(_CONTENT_KINDS[kind])}, got {content!r}")]
    return []


def _last_row(path: str) -> list[str]:
    pandas = require("pandas", "pandas", metric="content_from_vm_file")
    require("openpyxl", "openpyxl", metric="content_from_vm_file")
    frame = pandas.read_excel(path)
    return frame.iloc[-1].astype(str).tolist()


@getter(
    "content_from_vm_file", required=("path", "file_type", "file_content"), check=_check_content
)
async def content_from_vm_file(ctx: GetterContext, config: dict[str, Any]) -> list[str]:
    """Values from a desktop file; `xlsx` + `last_row`: the first sheet's last row
    (pandas, header on the first row) as strings."""
    path = config["path"]
    local = await fetch_to_cache(ctx, path, PurePosixPath(path).name)
    return await asyncio.to_thread(_last_row, local)
