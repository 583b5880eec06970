"""How much of a guest's answer the host reads (a cap per kind of body) and how
it is checked and quoted.

A desktop is the agent's: its guest (or whatever took over its channel) may
answer a screenshot with a gigabyte, a JSON route with endless text, or the
wrong kind of bytes. `GuestClient` reads every body through `read_capped`, which
stops at the cap (announced by Content-Length or not) and raises `GuestError`
with one line naming the request, so such an answer aborts that one episode and
the host's memory stays within the cap plus one read chunk (docs/sandbox.md).
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import aiohttp

from cua_rl.errors import GuestError

BodyKind = Literal["image", "json", "text", "file", "video", "error"]
_CHUNK = 1 << 16


@dataclass(frozen=True, slots=True)
class BodyCaps:
    """Largest body (bytes) accepted per kind; defaults fit the largest honest answer."""

    image: int = 64 << 20
    """Screenshots and wallpapers: a 4K screen as an uncompressed PNG is ~33 MB."""
    json: int = 32 << 20
    """JSON routes: /execute keeps 1 MiB of each stream (escaping may grow it);
    accessibility trees of busy apps run to a few MB."""
    text: int = 64 << 10
    """Plain text (/platform) and anything not listed."""
    file: int = 512 << 20
    """`/file` downloads: the guest's own upload/download bound."""
    video: int = 1 << 30
    """Screen recordings (MP4)."""
    error: int = 64 << 10
    """The body of an error status: only quoted, never parsed at length."""

    def of(self, kind: BodyKind) -> int:
        return int(getattr(self, kind))


DEFAULT_CAPS = BodyCaps()


async def read_capped(
    resp: aiohttp.ClientResponse, cap: int, what: str, *, truncate: bool = False
) -> bytes:
    """The whole body of `resp`, or GuestError as soon as it exceeds `cap` bytes;
    with `truncate`, its first `cap` bytes instead (an error status's text, which
    is only quoted). Either way no more than `cap` plus one chunk is held."""
    declared = resp.content_length
    if declared is not None and declared > cap and not truncate:
        raise GuestError(f"{what}: answer of {declared} bytes exceeds its cap of {cap} bytes")
    body = bytearray()
    async for chunk in resp.content.iter_chunked(_CHUNK):
        if len(body) + len(chunk) > cap:
            if truncate:
                body += chunk[: cap - len(body)]
                break
            raise GuestError(f"{what}: answer exceeds its cap of {cap} bytes")
        body += chunk
    return bytes(body)


async def stream_capped(resp: aiohttp.ClientResponse, dest: Path, cap: int, what: str) -> int:
    """Write the body of `resp` to `dest` (through a temporary file beside it, renamed
    when complete), or remove the partial file and raise GuestError once it exceeds
    `cap` bytes. Returns the size written. File writes go through a thread."""
    declared = resp.content_length
    if declared is not None and declared > cap:
        raise GuestError(f"{what}: answer of {declared} bytes exceeds its cap of {cap} bytes")
    part = dest.with_name(f".{dest.name}.part")
    size = 0
    fh = await asyncio.to_thread(open, part, "wb")
    try:
        async for chunk in resp.content.iter_chunked(_CHUNK):
            size += len(chunk)
            if size > cap:
                raise GuestError(f"{what}: answer exceeds its cap of {cap} bytes")
            await asyncio.to_thread(fh.write, chunk)
    except BaseException:
        await asyncio.to_thread(fh.close)
        part.unlink(missing_ok=True)
        raise
    await asyncio.to_thread(fh.close)
    await asyncio.to_thread(os.replace, part, dest)
    return size


IMAGE_MAGIC = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff")


def check_image(body: bytes, what: str) -> bytes:
    """`body` if it starts like a PNG or a JPEG, else GuestError (one line)."""
    if not body.startswith(IMAGE_MAGIC):
        raise GuestError(f"{what}: expected a PNG or JPEG image, got {body[:16]!r}")
    return body


def parse_json(body: bytes, what: str, expect: type | tuple[type, ...]) -> Any:
    try:
        data = json.loads(body)
    except ValueError:
        raise GuestError(f"{what}: expected JSON, got {quote(body, 120)}") from None
    if not isinstance(data, expect):
        raise GuestError(f"{what}: expected a JSON {_names(expect)}, got {type(data).__name__}")
    return data


def _names(expect: type | tuple[type, ...]) -> str:
    types = expect if isinstance(expect, tuple) else (expect,)
    return " or ".join(
        {"dict": "object", "list": "array"}.get(t.__name__, t.__name__) for t in types
    )


def ints(values: Any, count: int, what: str) -> tuple[int, int]:
    """Two integers from a guest's answer, else GuestError."""
    try:
        x, y = (int(v) for v in list(values)[:count])
    except (TypeError, ValueError):
        raise GuestError(f"{what}: expected {count} integers, got {quote(values, 80)}") from None
    return x, y


def quote(value: Any, limit: int = 300) -> str:
    """A guest's words as an error message may quote them: printable ASCII, capped."""
    text = value[: limit * 4].decode(errors="replace") if isinstance(value, bytes) else str(value)
    shown = "".join(c if " " <= c <= "~" else "?" for c in text[:limit])
    return shown + ("..." if len(text) > limit else "")


def loads_or_none(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return None


def error_text(body: bytes) -> str:
    data = loads_or_none(body)
    if isinstance(data, dict):
        return quote(data.get("message") or data.get("error") or data)
    return quote(body)
