"""File getters: `vm_file` (from the desktop), `cloud_file` (from a URL through the
host's FileCache) and `cache_file` (written earlier into the trajectory folder).

Files land in the per-trajectory `cache_dir` under their `dest` name, as in
OSWorld, because metrics derive sibling names from it (compare_table's
`sheet_print` reads `<dest stem>-<sheet>.csv`). With `multi`, `path` and `dest`
are aligned lists and `gives` picks which files the metric receives (default
[0]); one given file is returned as a path string, several as a list.

A single requested file that does not exist raises FileNotFoundError, which
`evaluate` scores 0 (OSWorld's rule); in `multi` mode a missing file is a None
entry, as OSWorld returns it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cua_rl.atomic_file import write_bytes_atomic
from cua_rl.evaluation.registry import Finding, GetterContext, getter


def is_flag(value: Any) -> bool:
    """A boolean switch: true/false, or the strings "true"/"false" that some
    OSWorld task files use (OSWorld reads them by truthiness)."""
    return isinstance(value, bool) or value in ("true", "false")


def flag(value: Any) -> bool:
    return value is True or value == "true"


def check_file_config(config: Mapping[str, Any]) -> list[Finding]:
    """Shape of path/dest/multi/gives; dest must be a bare file name."""
    problems: list[Finding] = []
    if not is_flag(config.get("multi", False)):
        return [(".multi", f"true or false, got {config['multi']!r}")]
    multi = flag(config.get("multi", False))
    paths, dests = config["path"], config["dest"]
    if multi:
        for key, value in (("path", paths), ("dest", dests)):
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                problems.append((f".{key}", "an array of strings (multi is true)"))
        if problems:
            return problems
        if len(paths) != len(dests):
            problems.append((".dest", f"{len(paths)} names aligned with path, got {len(dests)}"))
        dest_list = dests
    else:
        for key, value in (("path", paths), ("dest", dests)):
            if not isinstance(value, str) or not value:
                problems.append((f".{key}", "a non-empty string (use multi for lists)"))
        dest_list = [dests] if isinstance(dests, str) else []
    for i, dest in enumerate(dest_list):
        if not dest or "/" in dest or "\\" in dest or dest in (".", ".."):
            at = f".dest[{i}]" if multi else ".dest"
            problems.append((at, f"a bare file name inside the cache folder, got {dest!r}"))
    gives = config.get("gives", [0])
    count = len(paths) if multi and isinstance(paths, list) else 1
    if not isinstance(gives, list) or not all(
        isinstance(g, int) and not isinstance(g, bool) and 0 <= g < count for g in gives
    ):
        problems.append((".gives", f"an array of indices below {count}, got {gives!r}"))
    return problems


def _entries(config: Mapping[str, Any]) -> tuple[list[str], list[str], set[int]]:
    if flag(config.get("multi", False)):
        return list(config["path"]), list(config["dest"]), set(config.get("gives", [0]))
    return [config["path"]], [config["dest"]], set(config.get("gives", [0]))


def _place(source: Path, target: Path) -> None:
    """Put a cached download at its dest name: a hard link when possible (assets
    reach ~100 MB), else a copy."""
    target.parent.mkdir(parents=True, exist_ok=True)
    target.unlink(missing_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def _given(out: list[str | None], multi: bool, what: str) -> str | list[str | None] | None:
    if not multi and out and out[0] is None:
        raise FileNotFoundError(what)
    return out[0] if len(out) == 1 else out


@getter("vm_file", required=("path", "dest"), check=check_file_config)
async def vm_file(ctx: GetterContext, config: dict[str, Any]) -> Any:
    """Fetch file(s) from the desktop into the trajectory folder."""
    paths, dests, gives = _entries(config)
    out: list[str | None] = []
    for i, (path, dest) in enumerate(zip(paths, dests, strict=True)):
        data = await ctx.client.get_file(path)
        target = ctx.cache_dir / dest
        if data is not None:
            await asyncio.to_thread(write_bytes_atomic, target, data)
        if i in gives:
            out.append(str(target) if data is not None else None)
    missing = f"{paths[0]} does not exist on the desktop"
    return _given(out, flag(config.get("multi", False)), missing)


@getter("cloud_file", required=("path", "dest"), check=check_file_config)
async def cloud_file(ctx: GetterContext, config: dict[str, Any]) -> Any:
    """Download file(s) once per host (FileCache) and place them in the trajectory folder.

    A failed download raises the cache's SetupStepError: the task's reference
    is unreachable, which says nothing about the agent.
    """
    urls, dests, gives = _entries(config)
    out: list[str | None] = []
    for i, (url, dest) in enumerate(zip(urls, dests, strict=True)):
        target = ctx.cache_dir / dest
        if not target.exists():  # OSWorld reuses a file already in the folder
            local = await ctx.cache.fetch(url)
            await asyncio.to_thread(_place, local, target)
        if i in gives:
            out.append(str(target))
    return out[0] if len(out) == 1 else out


@getter("cache_file", required=("path",))
async def cache_file(ctx: GetterContext, config: dict[str, Any]) -> str:
    """A file a setup step wrote earlier (stdout of an execute step), looked up in
    the trajectory folder, then in the setup context's output folder."""
    folders = [ctx.cache_dir]
    if ctx.setup is not None and ctx.setup.output_dir is not None:
        folders.append(Path(ctx.setup.output_dir))
    for folder in folders:
        candidate = folder / config["path"]
        if candidate.is_file():
            return str(candidate)
    raise FileNotFoundError(f"{config['path']} is not in {', '.join(map(str, folders))}")
