"""GuestClient reads no answer unbounded and accepts no answer of the wrong kind,
against a hostile stand-in guest on 127.0.0.1 (a taken-over channel's answers)."""

from __future__ import annotations

import asyncio
import resource
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from cua_rl.desktop.client import GuestClient
from cua_rl.desktop.guest_response_caps import BodyCaps, quote
from cua_rl.errors import GuestError

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 100
CAPS = BodyCaps(image=1 << 20, json=64 << 10, error=1 << 10, file=1 << 20)
FLOOD_MB = 64
"""What the hostile guest streams where a 1 MiB screenshot is the cap."""


async def _flood(request: web.Request) -> web.StreamResponse:
    """A screenshot answer with no Content-Length that never stops being big."""
    resp = web.StreamResponse(headers={"Content-Type": "image/png"})
    await resp.prepare(request)
    chunk = PNG + b"\0" * ((1 << 20) - len(PNG))
    for _ in range(FLOOD_MB):
        await resp.write(chunk)
    await resp.write_eof()
    return resp


def _answer(response: web.StreamResponse):  # noqa: ANN202 - an aiohttp handler
    async def handler(request: web.Request) -> web.StreamResponse:
        return response

    return handler


async def _screenshot(request: web.Request) -> web.StreamResponse:
    if request.query.get("format") == "png":
        return await _flood(request)
    return web.Response(body=b"<html>not an image</html>")


async def _file(request: web.Request) -> web.StreamResponse:
    """/file: a small file, a missing one, or one that streams past the 1 MiB cap."""
    name = (await request.post())["file_path"]
    if name == "small":
        return web.Response(body=b"x" * 1000)
    if name == "missing":
        return web.json_response({"message": "no such file"}, status=404)
    resp = web.StreamResponse()
    await resp.prepare(request)
    for _ in range(8):
        await resp.write(b"y" * (1 << 20))
    await resp.write_eof()
    return resp


def _app() -> web.Application:
    app = web.Application()
    app.router.add_post("/file", _file)
    app.router.add_get("/screenshot", _screenshot)
    app.router.add_post("/screen_size", _answer(web.json_response(["not", "an object"])))
    app.router.add_get("/cursor_position", _answer(web.json_response({"x": "a", "y": None})))
    app.router.add_post(
        "/desktop_path",
        _answer(
            web.Response(body=b"{" + b" " * (128 << 10) + b"}", content_type="application/json")
        ),
    )
    app.router.add_post("/execute", _answer(web.Response(body=b"{not json")))
    app.router.add_get(
        "/platform",
        _answer(web.json_response({"message": "\x1b[2J\x1b]0;owned\x07" + "x" * 5000}, status=500)),
    )
    return app


@pytest.fixture
async def hostile() -> AsyncIterator[GuestClient]:
    runner = web.AppRunner(_app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    client = GuestClient(f"http://127.0.0.1:{runner.addresses[0][1]}", "t", timeout=20, caps=CAPS)
    yield client
    await client.close()
    await runner.cleanup()


async def test_an_endless_screenshot_stops_at_its_cap(hostile: GuestClient) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(GuestError, match=r"GET .*/screenshot: answer exceeds its cap of 1048576"):
        await hostile.screenshot()
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 16 << 10, f"peak RSS grew {grown_kib} KiB for a {FLOOD_MB} MiB answer"


async def test_a_screenshot_that_is_no_image_is_refused(hostile: GuestClient) -> None:
    with pytest.raises(GuestError, match="expected a PNG or JPEG image"):
        await hostile.screenshot(fmt="jpeg")


async def test_json_of_the_wrong_shape_or_size_is_one_guest_error(hostile: GuestClient) -> None:
    with pytest.raises(GuestError, match="expected a JSON object, got list"):
        await hostile.screen_size()
    with pytest.raises(GuestError, match="expected 2 integers"):
        await hostile.cursor_position()
    with pytest.raises(GuestError, match="exceeds its cap of 65536"):
        await hostile.desktop_path()
    with pytest.raises(GuestError, match="expected JSON"):
        await hostile.execute("true")


async def test_error_text_is_quoted_sanitized_and_capped(hostile: GuestClient) -> None:
    with pytest.raises(GuestError) as info:
        await hostile.platform()
    message = str(info.value)
    assert "\x1b" not in message and "\x07" not in message
    assert len(message) < 500 and message.endswith("...")
    assert "HTTP 500" in message
    assert quote(b"\xff\x00ok") == "??ok"


async def test_a_file_is_streamed_to_disk_within_its_cap(
    hostile: GuestClient, tmp_path: Path
) -> None:
    dest = tmp_path / "got"
    assert await hostile.save_file("small", dest)
    assert await asyncio.to_thread(dest.read_bytes) == b"x" * 1000
    assert not await hostile.save_file("missing", tmp_path / "none")
    with pytest.raises(GuestError, match=r"POST .*/file: answer exceeds its cap of 1048576"):
        await hostile.save_file("huge", tmp_path / "huge")
    left = await asyncio.to_thread(lambda: sorted(p.name for p in tmp_path.iterdir()))
    assert left == ["got"]  # no partial file left
