"""The tasks of an evaluation: their ids, a hash of each task file and of each asset
a task's setup or evaluator reads from the cache, and the commit of the OSWorld
checkout they come from when it is a git checkout.

Assets can add up to gigabytes; a hash already in the previous manifest of the
same run is reused while the file keeps its size and modification time, so a
resumed evaluation does not read them all again.
"""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cua_rl.desktop.file_cache import FileCache, local_path
from cua_rl.report.manifest.model import sha256_file
from cua_rl.tasks.preflight import task_needs
from cua_rl.types import TaskVariant


def git_state(path: Path, timeout_s: float = 30.0) -> dict[str, Any] | None:
    """{commit, dirty} of the git checkout holding `path`, or None when it is not one
    (or git is missing)."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", "-C", str(path), *args],
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return None
    status = git("status", "--porcelain")
    return {"commit": commit.strip(), "dirty": bool(status and status.strip())}


def _asset_hash(path: Path, known: Mapping[str, Any]) -> str:
    stat = path.stat()
    old = known.get(str(path))
    if old and old.get("bytes") == stat.st_size and old.get("mtime_ns") == stat.st_mtime_ns:
        return str(old["sha256"])
    return sha256_file(path)


def asset_entries(
    tasks: Sequence[TaskVariant], cache: FileCache, previous: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """URL -> {path, bytes, mtime_ns, sha256} of every asset the tasks read, or
    {"cached": False} for one not in the cache (its task cannot run)."""
    known = {e["path"]: e for e in (previous or {}).values() if isinstance(e, dict) and "path" in e}
    out: dict[str, Any] = {}
    for task in tasks:
        for url in task_needs(task).assets:
            if url in out:
                continue
            path = (
                local_path(url)
                if not url.startswith(("http://", "https://"))
                else cache.cached(url)
            )
            if path is None or not path.is_file():
                out[url] = {"cached": False}
                continue
            stat = path.stat()
            out[url] = {
                "path": str(path),
                "bytes": stat.st_size,
                "mtime_ns": stat.st_mtime_ns,
                "sha256": _asset_hash(path, known),
            }
    return out


def task_entries(tasks: Sequence[TaskVariant]) -> dict[str, Any]:
    """Task id -> {domain, file, sha256 of the file} (a task without a file, one of the
    local suite's built in code, gets the hash of its definition)."""
    out = {}
    for task in tasks:
        file = Path(task.source_path) if task.source_path else None
        if file is not None and file.is_file():
            digest = sha256_file(file)
        else:
            digest = hashlib.sha256(
                repr((task.instruction, task.config, task.evaluator)).encode()
            ).hexdigest()
        out[task.task_id] = {
            "domain": task.domain,
            "file": str(file) if file else None,
            "sha256": digest,
        }
    return out


def tasks_section(
    source: str,
    split: str | None,
    tasks: Sequence[TaskVariant],
    cache: FileCache,
    previous: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The manifest's `tasks`."""
    out: dict[str, Any] = {
        "source": source,
        "split": split,
        "count": len(tasks),
        "ids": [t.task_id for t in tasks],
        "files": task_entries(tasks),
        "assets": asset_entries(tasks, cache, (previous or {}).get("assets")),
        "cache": str(cache.root),
    }
    if source.startswith("osworld:"):
        checkout = Path(source.removeprefix("osworld:")).expanduser()
        out["osworld_checkout"] = {"path": str(checkout), "git": git_state(checkout)}
    return out
