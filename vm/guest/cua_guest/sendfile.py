"""Sending a desktop file as a download with a header that is always valid.

A file name may hold anything but '/' and NUL: quotes, newlines, non-ASCII.
Put raw into `Content-Disposition` a newline is a header injection (aiohttp
refuses it and drops the connection) and a quote ends the value early, so the
header carries an ASCII fallback plus the exact name in RFC 5987 form
(`filename*=UTF-8''...`), as RFC 6266 recommends.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

from aiohttp import web

#: Printable ASCII allowed verbatim in the quoted fallback name.
_PLAIN = frozenset(chr(c) for c in range(0x20, 0x7F)) - {'"', "\\", "%"}


def content_disposition(name: str) -> str:
    """`attachment; filename="fallback"; filename*=UTF-8''exact` for any file name."""
    fallback = "".join(ch if ch in _PLAIN else "_" for ch in name) or "download"
    # surrogateescape: names that are not UTF-8 on disk keep their original bytes.
    exact = quote(name.encode("utf-8", "surrogateescape"), safe="")
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{exact}"


def send_file(path: Path) -> web.FileResponse:
    """Stream `path` (sendfile) as an attachment named after it."""
    return web.FileResponse(path, headers={"Content-Disposition": content_disposition(path.name)})
