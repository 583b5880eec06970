"""Reading the desktop's files: /file, /list_directory, /desktop_path, /wallpaper.

Files are streamed with sendfile (aiohttp's FileResponse), and directory walks
run in a thread, so large results never stall other requests.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from typing import Any

from aiohttp import web

from cua_guest.bodies import BadRequest, json_error, read_fields, read_json, require_str
from cua_guest.procs import run_command

routes = web.RouteTableDef()


def _expand(path: str) -> Path:
    return Path(os.path.expandvars(os.path.expanduser(path)))


def _send(path: Path) -> web.StreamResponse:
    headers = {"Content-Disposition": f'attachment; filename="{path.name}"'}
    return web.FileResponse(path, headers=headers)


@routes.post("/file")
async def get_file(request: web.Request) -> web.StreamResponse:
    """Raw bytes of the file named by the form (or JSON) field file_path; 404 if missing."""
    fields = await read_fields(request)
    path = _expand(require_str(fields, "file_path"))
    if not path.exists():
        return json_error(404, f"file_path: file not found: {path}", error="File not found")
    if not path.is_file():
        raise BadRequest(f"file_path: {path} is not a regular file")
    return _send(path)


def _tree(directory: Path) -> dict[str, Any]:
    """OSWorld's tree: {type: directory, name, children: [...]} with files as {type, name}.

    Symlinked directories are listed but not entered, so link loops cannot recurse.
    """
    node: dict[str, Any] = {"type": "directory", "name": directory.name, "children": []}
    try:
        entries = os.listdir(directory)
    except OSError as exc:
        return {"error": str(exc)}
    for entry in entries:
        full = directory / entry
        if full.is_dir() and not full.is_symlink():
            node["children"].append(_tree(full))
        elif full.is_dir():
            node["children"].append({"type": "directory", "name": entry, "children": []})
        else:
            node["children"].append({"type": "file", "name": entry})
    return node


@routes.post("/list_directory")
async def list_directory(request: web.Request) -> web.Response:
    body = await read_json(request)
    path = _expand(require_str(body, "path"))
    if not path.is_dir():
        raise BadRequest(f"path: {path} is not a directory")
    loop = asyncio.get_running_loop()
    tree = await loop.run_in_executor(None, _tree, path)
    return web.json_response({"directory_tree": tree})


@routes.post("/desktop_path")
async def desktop_path(request: web.Request) -> web.Response:
    path = Path.home() / "Desktop"
    if path.exists():
        return web.json_response({"desktop_path": str(path)})
    return json_error(404, f"desktop path not found: {path}", error="desktop path not found")


@routes.post("/wallpaper")
async def wallpaper(request: web.Request) -> web.StreamResponse:
    """The current wallpaper file (GNOME's picture-uri setting)."""
    if not shutil.which("gsettings"):
        return json_error(404, "Wallpaper file not found (gsettings is not installed)")
    result = await run_command(
        ["gsettings", "get", "org.gnome.desktop.background", "picture-uri"], timeout=10
    )
    value = result.stdout.strip().strip("'").removeprefix("file://")
    path = Path(value) if value else None
    if result.returncode != 0 or path is None or not path.is_file():
        return json_error(404, f"Wallpaper file not found ({value or result.stderr.strip()})")
    return _send(path)
