"""Reading the desktop's files: /file, /list_directory, /desktop_path, /wallpaper.

Files are streamed with sendfile (aiohttp's FileResponse), and directory walks
run in a thread, so large results never stall other requests.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from aiohttp import web

from cua_guest.bodies import BadRequest, json_error, read_fields, read_json, require_str
from cua_guest.sendfile import send_file
from cua_guest.state import GUEST
from cua_guest.wallpaper import current_wallpaper
from cua_guest.x11 import DisplayUnavailable

routes = web.RouteTableDef()


def _expand(path: str) -> Path:
    return Path(os.path.expandvars(os.path.expanduser(path)))


@routes.post("/file")
async def get_file(request: web.Request) -> web.StreamResponse:
    """Raw bytes of the file named by the form (or JSON) field file_path; 404 if missing."""
    fields = await read_fields(request)
    path = _expand(require_str(fields, "file_path"))
    if not path.exists():
        return json_error(404, f"file_path: file not found: {path}", error="File not found")
    if not path.is_file():
        raise BadRequest(f"file_path: {path} is not a regular file")
    return send_file(path)


def _tree(directory: Path) -> dict[str, Any]:
    """OSWorld's tree: {type: directory, name, children: [...]} with files as {type, name}.

    Symlinked directories are listed but not entered, so link loops cannot recurse.
    An entry that cannot be examined (no permission, a name too long to stat) is
    listed as a file, as OSWorld's server does (os.path.isdir is False on any
    error); a directory that cannot be read becomes {"error": ...}.
    """
    node: dict[str, Any] = {"type": "directory", "name": directory.name, "children": []}
    try:
        entries = os.listdir(directory)
    except OSError as exc:
        return {"error": str(exc)}
    for entry in entries:
        full = directory / entry
        if not os.path.isdir(full):  # False (not an exception) when stat fails
            node["children"].append({"type": "file", "name": entry})
        elif os.path.islink(full):
            node["children"].append({"type": "directory", "name": entry, "children": []})
        else:
            node["children"].append(_tree(full))
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
    """The current wallpaper file (see wallpaper.py for where it is looked up)."""
    try:
        path = await current_wallpaper(request.app[GUEST].x11)
    except DisplayUnavailable as exc:
        return json_error(503, str(exc))
    if path is None:
        return json_error(404, "Wallpaper file not found")
    return send_file(path)
