"""Task setup steps: launching apps, opening files, uploads, window management.

Successful replies are the short texts OSWorld's guest returns (its host code
only checks the status code); failures are JSON errors naming what went wrong.
`/setup/open_file` waits for a window whose title contains the file name by
polling with a deadline, as OSWorld does, so the host never sleeps blindly.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

from aiohttp import BodyPartReader, web

from cua_guest.bodies import (
    BadRequest,
    json_error,
    optional_bool,
    optional_number,
    read_json,
    require_str,
)
from cua_guest.procs import CommandNotRunnable
from cua_guest.routes_exec import command_argv
from cua_guest.state import GUEST
from cua_guest.transfer import MULTIPART_SLACK, TooLarge, check_declared_size, stream_to
from cua_guest.wallpaper import WallpaperError
from cua_guest.wallpaper import change_wallpaper as paint_wallpaper
from cua_guest.windows import ToolMissing, activate_id, wait_for_window, wmctrl_by_name
from cua_guest.x11 import DisplayUnavailable

routes = web.RouteTableDef()

OPEN_FILE_TIMEOUT_S = 180.0
_OFFICE_SUFFIXES = {
    ".csv",
    ".ods",
    ".xls",
    ".xlsx",
    ".xlsm",
    ".doc",
    ".docx",
    ".odt",
    ".ppt",
    ".pptx",
    ".odp",
    ".rtf",
}


#: Names tasks use for Chrome, and the Chromium builds that stand in for it.
_CHROME_NAMES = ("google-chrome", "google-chrome-stable")
_CHROMIUM_NAMES = ("chromium", "chromium-browser")


def _expand(path: str) -> Path:
    return Path(os.path.expandvars(os.path.expanduser(path)))


def resolve_browser(argv: list[str]) -> list[str]:
    """OSWorld's tasks launch `google-chrome`; where it is not installed but Chromium
    is (any architecture: Chrome has no arm64 build, Debian has no Chrome), run that."""
    chromium = next((name for name in _CHROMIUM_NAMES if shutil.which(name)), None)
    if chromium is None:
        return argv
    resolved = list(argv)
    for index, arg in enumerate(resolved):
        if arg in _CHROME_NAMES and shutil.which(arg) is None:
            resolved[index] = chromium
    if resolved[:2] == ["/bin/sh", "-c"] and len(resolved) > 2:  # shell=True: first word
        first, sep, rest = resolved[2].partition(" ")
        if first in _CHROME_NAMES and shutil.which(first) is None:
            resolved[2] = chromium + sep + rest
    return resolved


@routes.post("/setup/launch")
async def launch(request: web.Request) -> web.StreamResponse:
    """Start an application in the background and return at once."""
    body = await read_json(request)
    argv = resolve_browser(command_argv(body))
    try:
        request.app[GUEST].launched.launch(argv)
    except CommandNotRunnable as exc:
        return json_error(exc.status, str(exc))
    shown = argv[-1] if optional_bool(body, "shell", False) else " ".join(argv)
    return web.Response(text=f"{shown} launched successfully")


def _opener(path: Path) -> list[str]:
    """How to open a file: xdg-open, else gio, else LibreOffice for office files."""
    for tool in (["xdg-open"], ["gio", "open"]):
        if shutil.which(tool[0]):
            return [*tool, str(path)]
    if path.suffix.lower() in _OFFICE_SUFFIXES and shutil.which("libreoffice"):
        return ["libreoffice", "--norestore", str(path)]
    raise ToolMissing("no way to open files: install xdg-utils (xdg-open)")


@routes.post("/setup/open_file")
async def open_file(request: web.Request) -> web.StreamResponse:
    """Open a file (or start an app by name) and wait until its window appears."""
    body = await read_json(request)
    raw = require_str(body, "path")
    timeout = optional_number(body, "timeout", OPEN_FILE_TIMEOUT_S, low=0, high=3600)
    path = _expand(raw)
    if path.exists():
        names = [path.name, path.stem]
        try:
            argv = _opener(path)
        except ToolMissing as exc:
            return json_error(501, str(exc))
    elif shutil.which(raw):
        names, argv = [raw], [raw]
    else:
        return json_error(404, f"path: no such file or application: {raw}")
    try:
        request.app[GUEST].launched.launch(argv)
        window_id = await wait_for_window(names, timeout)
    except CommandNotRunnable as exc:
        return json_error(exc.status, str(exc))
    except ToolMissing as exc:
        return json_error(500, str(exc))
    if window_id is None:
        return json_error(500, f"Failed to find window for {names[0]} within {timeout:g} seconds.")
    await activate_id(window_id)
    return web.Response(text="File opened and window activated successfully")


@routes.post("/setup/upload")
async def upload(request: web.Request) -> web.StreamResponse:
    """Multipart upload: form field file_path plus file part file_data, streamed to disk."""
    if request.content_type != "multipart/form-data":
        raise BadRequest("request body: expected multipart/form-data with file_path and file_data")
    limit = request.app[GUEST].limits.max_upload_bytes
    loop = asyncio.get_running_loop()
    target: Path | None = None
    staged: Path | None = None
    size = 0
    try:
        check_declared_size(request.content_length, limit, "upload", MULTIPART_SLACK)
        reader = await request.multipart()
        while (part := await reader.next()) is not None:
            if not isinstance(part, BodyPartReader):
                continue
            if part.name == "file_path":
                target = _expand(await part.text())
            elif part.name == "file_data":
                # Stage next to the target when known, so the final move is a rename.
                staging_dir = target.parent if target is not None else Path(tempfile.gettempdir())
                await loop.run_in_executor(None, _make_dir, staging_dir)
                fd, name = tempfile.mkstemp(prefix=".cua_upload_", dir=staging_dir)
                staged = Path(name)
                with os.fdopen(fd, "wb") as sink:
                    size = await stream_to(sink, _chunks(part), limit, "upload")
        if target is None or staged is None:
            missing = "file_path" if target is None else "file_data"
            raise BadRequest(f"{missing}: expected in the multipart body (file_path and file_data)")
        await loop.run_in_executor(None, _make_dir, target.parent)
        await loop.run_in_executor(None, shutil.move, str(staged), str(target))
        staged = None
    except TooLarge as exc:
        return json_error(413, str(exc))
    except ValueError as exc:  # aiohttp's multipart reader on a body that is not multipart
        raise BadRequest(f"request body: malformed multipart/form-data ({exc})") from None
    except OSError as exc:
        return json_error(500, f"Failed to upload file to {target}: {exc}")
    finally:
        if staged is not None:
            staged.unlink(missing_ok=True)
    return web.Response(text=f"File Uploaded: {size} bytes")


async def _chunks(part: BodyPartReader) -> AsyncIterator[bytes]:
    while chunk := await part.read_chunk(1 << 20):
        yield chunk


def _make_dir(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)


async def _wmctrl_route(request: web.Request, action: str, done: str) -> web.StreamResponse:
    body = await read_json(request)
    name = require_str(body, "window_name")
    strict = optional_bool(body, "strict", False)
    by_class = optional_bool(body, "by_class", False)
    try:
        code = await wmctrl_by_name(action, name, strict, by_class)
    except ToolMissing as exc:
        return json_error(501, str(exc))
    if code != 0:
        return json_error(404, f"window_name: no window matches {name!r}")
    return web.Response(text=done)


@routes.post("/setup/activate_window")
async def activate_window(request: web.Request) -> web.StreamResponse:
    return await _wmctrl_route(request, "a", "Window activated successfully")


@routes.post("/setup/close_window")
async def close_window(request: web.Request) -> web.StreamResponse:
    return await _wmctrl_route(request, "c", "Window closed successfully.")


@routes.post("/setup/change_wallpaper")
async def change_wallpaper(request: web.Request) -> web.StreamResponse:
    """Paint the image on the root window, and set GNOME's key where it sticks."""
    body = await read_json(request)
    path = _expand(require_str(body, "path"))
    if not path.is_file():
        return json_error(404, f"path: file not found: {path}")
    try:
        await paint_wallpaper(request.app[GUEST].x11, path)
    except WallpaperError as exc:
        raise BadRequest(str(exc)) from None
    except DisplayUnavailable as exc:
        return json_error(503, str(exc))
    return web.Response(text="Wallpaper changed successfully")
