"""Observing the desktop: /healthz, /screenshot, sizes, pointer, platform, a11y tree.

/screenshot is the hot path: capture and encoding run in capture threads; the
default stays PNG (OSWorld's format) and `?format=jpeg&quality=N` is the fast
transport (`&encoder=turbo|pillow` picks the JPEG encoder, `cua_guest.capture`;
the answer names it in `X-Cua-Encoder` and its grab and encode times in
`Server-Timing`). /cursor_position returns [x, y] like OSWorld's jsonify(x, y).
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

from aiohttp import web

from cua_guest.accessibility import AccessibilityUnavailable
from cua_guest.bodies import BadRequest, json_error, read_fields
from cua_guest.capture import JPEG_ENCODERS
from cua_guest.state import GUEST
from cua_guest.x11 import DisplayUnavailable

routes = web.RouteTableDef()

_FORMATS = {"png": "png", "jpeg": "jpeg", "jpg": "jpeg"}
DEFAULT_JPEG_QUALITY = 90

FAULT_HOOKS_ENV = "CUA_GUEST_FAULT_HOOKS"
"""Fault injection (`cua-rl bench faults`, the fault tests): when this is `1`, a file
named TRUNCATE_TRIGGER in the desktop user's home makes the next screenshot come
out cut in half (as a transfer that ended early would) and is removed: one fault
per trigger. A reset restores the home, so a fault never outlives its desktop."""
TRUNCATE_TRIGGER = ".cua-fault-truncate-screenshot"


def _maybe_truncate(data: bytes) -> bytes:
    if os.environ.get(FAULT_HOOKS_ENV) != "1":
        return data
    try:
        (Path.home() / TRUNCATE_TRIGGER).unlink()
    except OSError:
        return data
    return data[: len(data) // 2]


@routes.get("/healthz")
async def healthz(request: web.Request) -> web.Response:
    """200 once the X display answers; 503 otherwise (the host polls this)."""
    try:
        await request.app[GUEST].x11.ping()
    except DisplayUnavailable as exc:
        return json_error(503, str(exc))
    return web.json_response({"status": "ok"})


def _screenshot_options(request: web.Request) -> tuple[str, int, str | None]:
    raw_format = request.query.get("format", "png").lower()
    fmt = _FORMATS.get(raw_format)
    if fmt is None:
        raise BadRequest(f"format: expected png or jpeg, got {raw_format!r}")
    raw_quality = request.query.get("quality", str(DEFAULT_JPEG_QUALITY))
    try:
        quality = int(raw_quality)
    except ValueError:
        raise BadRequest(f"quality: expected an integer 1-100, got {raw_quality!r}") from None
    if not 1 <= quality <= 100:
        raise BadRequest(f"quality: expected an integer 1-100, got {quality}")
    encoder = request.query.get("encoder")
    if encoder is not None and encoder not in JPEG_ENCODERS:
        raise BadRequest(f"encoder: expected one of {', '.join(JPEG_ENCODERS)}, got {encoder!r}")
    return fmt, quality, encoder


@routes.get("/screenshot")
async def screenshot(request: web.Request) -> web.Response:
    fmt, quality, encoder = _screenshot_options(request)
    try:
        shot = await request.app[GUEST].capturer.capture(fmt, quality, encoder)  # type: ignore[arg-type]  # the query was validated against the Literal's values
    except ValueError as exc:  # an encoder this guest lacks
        raise BadRequest(str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - mss raises ScreenShotError and ctypes errors
        return json_error(503, f"screen capture failed: {exc}")
    headers = {
        "X-Cua-Encoder": shot.encoder,
        "Server-Timing": f"grab;dur={shot.grab_ms:.2f}, encode;dur={shot.encode_ms:.2f}",
    }
    return web.Response(
        body=_maybe_truncate(shot.data), content_type=f"image/{fmt}", headers=headers
    )


@routes.post("/screen_size")
async def screen_size(request: web.Request) -> web.Response:
    try:
        width, height = await request.app[GUEST].x11.ping()
    except DisplayUnavailable as exc:
        return json_error(503, str(exc))
    return web.json_response({"width": width, "height": height})


@routes.post("/window_size")
async def window_size(request: web.Request) -> web.Response:
    """Size of the first window whose WM_CLASS matches the field app_class_name."""
    fields = await read_fields(request)
    app_class = fields.get("app_class_name")
    if not isinstance(app_class, str) or not app_class:
        raise BadRequest("app_class_name: expected a non-empty string (form or JSON field)")
    try:
        size = await request.app[GUEST].x11.window_size(app_class)
    except DisplayUnavailable as exc:
        return json_error(503, str(exc))
    if size is None:
        return json_error(404, f"app_class_name: no window with class {app_class!r}")
    return web.json_response({"width": size[0], "height": size[1]})


@routes.get("/cursor_position")
async def cursor_position(request: web.Request) -> web.Response:
    try:
        x, y = await request.app[GUEST].x11.pointer()
    except DisplayUnavailable as exc:
        return json_error(503, str(exc))
    return web.json_response([x, y])


@routes.get("/platform")
async def get_platform(request: web.Request) -> web.Response:
    return web.Response(text=platform.system())


@routes.get("/accessibility")
async def accessibility(request: web.Request) -> web.Response:
    """{"AT": xml} from AT-SPI; 501 when no interpreter has pyatspi."""
    try:
        tree = await request.app[GUEST].atspi.run("tree")
    except AccessibilityUnavailable as exc:
        return json_error(501, str(exc))
    return web.json_response({"AT": tree.get("AT")})


@routes.get("/terminal")
async def terminal(request: web.Request) -> web.Response:
    """{"output": text or null} of the focused gnome-terminal, via AT-SPI."""
    try:
        result = await request.app[GUEST].atspi.run("terminal")
    except AccessibilityUnavailable as exc:
        return json_error(501, str(exc))
    return web.json_response({"output": result.get("output"), "status": "success"})
