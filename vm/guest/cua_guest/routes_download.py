"""/setup/download_file: the desktop fetches a URL into a file, as OSWorld's does.

OSWorld's server takes {"url", "path"}, tries three times, and answers
"File downloaded successfully" or 500 with the last error. Here each attempt is
bounded in time, the file is bounded by --max-upload-bytes (413), only http(s)
URLs are accepted (400), and the bytes land in a staged file renamed into place,
so a failed attempt never leaves half a file at `path`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp
from aiohttp import web

from cua_guest.bodies import BadRequest, json_error, read_json, require_str
from cua_guest.state import GUEST
from cua_guest.transfer import TooLarge, check_declared_size, stream_to

routes = web.RouteTableDef()

ATTEMPTS = 3
#: Bound on one attempt (connect + whole body).
ATTEMPT_TIMEOUT_S = 300.0


@routes.post("/setup/download_file")
async def download_file(request: web.Request) -> web.StreamResponse:
    body = await read_json(request)
    url = require_str(body, "url")
    path = _expand(require_str(body, "path"))
    if urlsplit(url).scheme not in ("http", "https"):
        raise BadRequest(f"url: expected an http or https URL, got {url[:80]!r}")
    limit = request.app[GUEST].limits.max_upload_bytes
    loop = asyncio.get_running_loop()
    try:
        await loop.run_in_executor(None, lambda: path.parent.mkdir(parents=True, exist_ok=True))
    except OSError as exc:
        return json_error(500, f"path: cannot create {path.parent}: {exc}")
    error = "no attempt made"
    for _ in range(ATTEMPTS):
        try:
            await _fetch(url, path, limit)
            return web.Response(text="File downloaded successfully")
        except TooLarge as exc:
            return json_error(413, str(exc))
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            error = str(exc) or type(exc).__name__
    return json_error(500, f"Failed to download {url}. No retries left. Error: {error}")


def _expand(path: str) -> Path:
    return Path(os.path.expandvars(os.path.expanduser(path)))


async def _fetch(url: str, path: Path, limit: int) -> None:
    """One attempt: GET url into a file next to `path`, renamed into place when whole."""
    timeout = aiohttp.ClientTimeout(total=ATTEMPT_TIMEOUT_S)
    fd, name = tempfile.mkstemp(prefix=".cua_download_", dir=path.parent)
    try:
        async with aiohttp.ClientSession(timeout=timeout) as session:
            async with session.get(url) as response:
                response.raise_for_status()
                check_declared_size(response.content_length, limit, "download")
                with os.fdopen(fd, "wb") as sink:
                    fd = -1
                    await stream_to(sink, response.content.iter_chunked(1 << 20), limit, "download")
        os.replace(name, path)
    finally:
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name)
