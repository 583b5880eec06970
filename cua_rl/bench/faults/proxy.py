"""An HTTP proxy on 127.0.0.1 in front of real model servers that misbehaves on
command, for `cua-rl bench faults` and `bench soak`.

It forwards every request unchanged, except the next `count` chat requests after
`arm(mode, count)`: `malformed` answers them 200 with a well-formed JSON body of the
wrong shape (empty `choices`), `hang` never answers them (the client's own deadline
ends the request). It runs its own event loop on a thread, so the synchronous bench
can drive it while a run talks through it.

Two ways in front of a server:
- a reverse proxy of one `upstream` (`bench faults`): the run is given the proxy's
  URL as its pool (`policy.urls`), which takes that server out of the run's own
  supervision;
- a forward proxy (no `upstream`, `bench soak`): the run's model clients send their
  chat requests through it (`CUA_RL_MODEL_PROXY`, inference/client.py) to the
  replicas the run started and supervises itself, so replica kills and restarts go
  on as without it. `arm(..., ports=...)` then picks which replicas' requests
  misbehave. Only loopback targets are forwarded (403 otherwise).
"""

from __future__ import annotations

import asyncio
import ipaddress
import threading
import time
from collections.abc import Collection
from typing import Literal

from aiohttp import ClientError, ClientSession, ClientTimeout, TCPConnector, web
from yarl import URL

Mode = Literal["malformed", "hang"]
BAD_ANSWER = {"id": "x", "object": "chat.completion", "choices": []}
"""The malformed answer: well-formed JSON, status 200, no choice."""


class FaultProxy:
    """Forwards to `upstream`; `arm` makes the next chat requests misbehave."""

    def __init__(self, upstream: str | None = None) -> None:
        """`upstream`: the one server behind it; None: a forward proxy (module doc)."""
        self.upstream = upstream.rstrip("/") if upstream else None
        self.url = ""
        self.mode: Mode | None = None
        self.remaining = 0
        self.ports: frozenset[int] | None = None
        """Forward mode: only chat requests to these ports misbehave (None: any)."""
        self.injected = 0
        self.forwarded = 0
        """Requests passed on to a server."""
        self.injected_at: float | None = None
        self.released_at: float | None = None
        """When the last injected request ended (answered badly, or its client gave up)."""
        self.first_good_after: float | None = None
        """When a chat request sent after that was first answered well (recovery)."""
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, daemon=True, name="fault-proxy"
        )
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

    def arm(self, mode: Mode, count: int, ports: Collection[int] | None = None) -> None:
        """The next `count` chat requests (to one of `ports`, when given) misbehave;
        the recovery figures start again."""
        with self._lock:
            self.mode, self.remaining = mode, count
            self.ports = frozenset(ports) if ports is not None else None
            self.injected_at = self.released_at = self.first_good_after = None

    def retarget(self, ports: Collection[int]) -> None:
        """Keep the arming, for these ports now (the replicas moved, e.g. a resumed run)."""
        with self._lock:
            self.ports = frozenset(ports)

    async def _start(self) -> None:
        self._never = asyncio.Event()
        # as many sockets as the run's clients open to all their replicas
        self._session = ClientSession(
            timeout=ClientTimeout(total=600), connector=TCPConnector(limit=1024)
        )
        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]  # the site was started on the line above
        self.url = f"http://127.0.0.1:{port}"

    async def _stop(self) -> None:
        if self._never is not None:
            self._never.set()
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    def _take(self, path: str, port: int | None) -> Mode | None:
        if not path.endswith("/chat/completions"):
            return None
        with self._lock:
            if self.mode is None or self.remaining <= 0:
                return None
            if self.ports is not None and port not in self.ports:
                return None
            self.remaining -= 1
            self.injected += 1
            self.injected_at = self.injected_at or time.monotonic()
            return self.mode

    def _target(self, request: web.Request) -> URL:
        """Where the request goes: the upstream, or (forward mode) the absolute URL it
        names, which must be on loopback."""
        if self.upstream is not None:
            return URL(self.upstream + request.path_qs)
        target = URL(request.raw_path)
        try:
            loopback = target.is_absolute() and ipaddress.ip_address(target.host or "").is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise web.HTTPForbidden(text=f"fault proxy: only loopback targets, not {target}")
        return target

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        target = self._target(request)
        fault = self._take(request.path, target.port)
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
            return web.json_response(BAD_ANSWER, headers={"x-model-version": "0"})
        assert self._session is not None
        started = time.monotonic()
        body = await request.read()
        headers = {
            k: v
            for k, v in request.headers.items()
            if k.lower() not in ("host", "content-length", "proxy-connection")
        }
        self.forwarded += 1
        try:
            async with self._session.request(
                request.method, target, data=body, headers=headers
            ) as upstream:
                data = await upstream.read()
                status, upstream_headers = upstream.status, upstream.headers
        except (ClientError, OSError, TimeoutError) as exc:  # as the server itself would
            return web.Response(status=502, text=f"fault proxy: {target}: {exc!r}")
        if (
            request.path.endswith("/chat/completions")
            and status == 200
            and self.released_at is not None
            and self.first_good_after is None
            and started > self.released_at
            and (self.ports is None or target.port in self.ports)
        ):
            self.first_good_after = time.monotonic()
        keep = {
            k: v
            for k, v in upstream_headers.items()
            if k.lower() in ("content-type", "x-model-version")
        }
        return web.Response(status=status, body=data, headers=keep)

    @property
    def served_all(self) -> bool:
        """Every armed request has misbehaved (none is still to come)."""
        with self._lock:
            return self.injected > 0 and self.remaining == 0

    @property
    def recover_s(self) -> float | None:
        if self.injected_at is None or self.first_good_after is None:
            return None
        return round(self.first_good_after - self.injected_at, 1)


def _gone(request: web.Request) -> bool:
    """True once the client closed the connection of `request`."""
    transport = request.transport
    return transport is None or transport.is_closing()
