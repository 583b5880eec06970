"""Assembling the aiohttp application: middlewares, routes, startup and shutdown.

Invariant: every request gets a JSON answer for errors. Bad input raises
BadRequest (400); anything unexpected is logged and becomes a 500 JSON error
without a traceback in the body.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from aiohttp import web

from cua_guest import (
    routes_download,
    routes_exec,
    routes_files,
    routes_info,
    routes_record,
    routes_setup,
)
from cua_guest.act_worker import ActWorker
from cua_guest.auth import Handler, auth_middleware
from cua_guest.bodies import BadRequest, json_error
from cua_guest.limits import GuestLimits
from cua_guest.state import GUEST, GuestState

log = logging.getLogger(__name__)

#: How often exited launched applications are reaped.
REAP_INTERVAL_S = 2.0
_REAPER: web.AppKey[asyncio.Task[None]] = web.AppKey("reaper", asyncio.Task)

#: Bodies read whole (JSON, forms); uploads are streamed and not bound by this.
MAX_BODY_BYTES = 64 * 1024 * 1024


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except BadRequest as exc:
        return json_error(400, str(exc))
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return json_error(exc.status, f"{request.method} {request.path}: {exc.reason}")
    except Exception as exc:  # noqa: BLE001 - the one place that turns surprises into JSON
        log.exception("unhandled error in %s %s", request.method, request.path)
        return json_error(500, f"{request.method} {request.path} failed: {exc!r}")


def build_app(
    token: str | None, act_timeout: float, limits: GuestLimits | None = None
) -> web.Application:
    """The guest application; `token=None` disables authentication."""
    # Auth runs before any route (so unauthenticated callers learn nothing, not even
    # 404s) but inside the error middleware, so even a failure in it answers JSON.
    app = web.Application(
        middlewares=[error_middleware, auth_middleware(token)], client_max_size=MAX_BODY_BYTES
    )
    app[GUEST] = GuestState(
        worker=ActWorker(default_timeout=act_timeout), limits=limits or GuestLimits()
    )
    for module in (
        routes_info,
        routes_exec,
        routes_setup,
        routes_download,
        routes_files,
        routes_record,
    ):
        app.add_routes(module.routes)
    app.on_startup.append(_start)
    app.on_cleanup.append(_stop)
    return app


async def _start(app: web.Application) -> None:
    # Warm the /act worker now so the first action is as fast as the rest.
    app[GUEST].worker.start()
    app[_REAPER] = asyncio.create_task(_reap_forever(app))


async def _reap_forever(app: web.Application) -> None:
    while True:
        await asyncio.sleep(REAP_INTERVAL_S)
        app[GUEST].launched.reap()


async def _stop(app: web.Application) -> None:
    app[_REAPER].cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await app[_REAPER]
    state = app[GUEST]
    await state.worker.close()
    state.launched.terminate_all()
    if state.recorder is not None:
        await state.recorder.close()
    state.capturer.close()
    state.x11.close()
