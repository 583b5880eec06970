"""An HTTP proxy on 127.0.0.1 in front of a real model server that misbehaves on
command, for `cua-rl bench faults`.

It forwards every request to the upstream server unchanged, except the next
`count` chat requests after `arm(mode, count)`: `malformed` answers them 200 with
a well-formed JSON body of the wrong shape (empty `choices`), `hang` never answers
them (the client's own deadline ends the request). It runs its own event loop on a
thread, so the synchronous bench can drive it while a run talks through it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Literal

from aiohttp import ClientSession, ClientTimeout, web

Mode = Literal["malformed", "hang"]


class FaultProxy:
    """Forwards to `upstream`; `arm` makes the next chat requests misbehave."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.url = ""
        self.mode: Mode | None = None
        self.remaining = 0
        self.injected = 0
        self.injected_at: float | None = None
        self.released_at: float | None = None
        """When the last injected request ended (answered badly, or its client gave up)."""
        self.first_good_after: float | None = None
        """When a chat request sent after that was first answered well (recovery)."""
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="fault-proxy")
        self._runner: web.AppRunner | None = None
        self._session: ClientSession | None = None
        self._never: asyncio.Event | None = None

    def start(self) -> FaultProxy:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(30)
        return self

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def arm(self, mode: Mode, count: int) -> None:
        with self._lock:
            self.mode, self.remaining = mode, count

    async def _start(self) -> None:
        self._never = asyncio.Event()
        self._session = ClientSession(timeout=ClientTimeout(total=600))
        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"

    async def _stop(self) -> None:
        if self._never is not None:
            self._never.set()
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    def _take(self, path: str) -> Mode | None:
        if not path.endswith("/chat/completions"):
            return None
        with self._lock:
            if self.mode is None or self.remaining <= 0:
                return None
            self.remaining -= 1
            self.injected += 1
            self.injected_at = self.injected_at or time.monotonic()
            return self.mode

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        fault = self._take(request.path)
        if fault == "hang":
            # Until the client gives up (its request deadline) or the proxy stops.
            assert self._never is not None
            while not self._never.is_set() and not _gone(request):  # noqa: ASYNC110 - no
                # event tells a handler that its client left; poll the transport
                await asyncio.sleep(0.2)
            self.released_at = time.monotonic()
            raise web.HTTPServiceUnavailable()
        if fault == "malformed":
            await request.read()
            self.released_at = time.monotonic()
            return web.json_response({"id": "x", "object": "chat.completion", "choices": []},
                                     headers={"x-model-version": "0"})
        assert self._session is not None
        started = time.monotonic()
        body = await request.read()
        headers = {k: v for k, v in request.headers.items()
                   if k.lower() not in ("host", "content-length")}
        async with self._session.request(request.method, self.upstream + request.path_qs,
                                         data=body, headers=headers) as upstream:
            data = await upstream.read()
            if (request.path.endswith("/chat/completions") and upstream.status == 200
                    and self.released_at is not None and self.first_good_after is None
                    and started > self.released_at):
                self.first_good_after = time.monotonic()
            keep = {k: v for k, v in upstream.headers.items()
                    if k.lower() in ("content-type", "x-model-version")}
            return web.Response(status=upstream.status, body=data, headers=keep)

    @property
    def recover_s(self) -> float | None:
        if self.injected_at is None or self.first_good_after is None:
            return None
        return round(self.first_good_after - self.injected_at, 1)


def _gone(request: web.Request) -> bool:
    """True once the client closed the connection of `request`."""
    transport = request.transport
    return transport is None or transport.is_closing()
