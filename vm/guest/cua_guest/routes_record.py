"""/start_recording and /end_recording, as OSWorld's server answers them.

Start answers {"status": "success", ...}; end answers the MP4 itself. Both
answer 400 in the cases OSWorld does (already recording / nothing to stop).
"""

from __future__ import annotations

import os

from aiohttp import web

from cua_guest.bodies import json_error
from cua_guest.recording import RecordingError
from cua_guest.sendfile import send_file
from cua_guest.state import GUEST
from cua_guest.x11 import DisplayUnavailable

routes = web.RouteTableDef()


@routes.post("/start_recording")
async def start_recording(request: web.Request) -> web.Response:
    state = request.app[GUEST]
    try:
        size = await state.x11.ping()
    except DisplayUnavailable as exc:
        return json_error(503, str(exc))
    assert state.recorder is not None
    try:
        await state.recorder.start(os.environ.get("DISPLAY", ":0"), size)
    except RecordingError as exc:
        return json_error(exc.status, str(exc))
    return web.json_response({"status": "success", "message": "Started recording successfully."})


@routes.post("/end_recording")
async def end_recording(request: web.Request) -> web.StreamResponse:
    recorder = request.app[GUEST].recorder
    assert recorder is not None
    try:
        path = await recorder.stop()
    except RecordingError as exc:
        return json_error(exc.status, str(exc))
    return send_file(path)
