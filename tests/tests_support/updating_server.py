"""A model server on 127.0.0.1 whose weight updates take time, for weight-sync tests.

It answers chat completions like a real server and, like the hf engine's gate, makes
a request that arrives during an update wait until the update is done. It counts
those requests (`during_update`): a staggered sync must leave it at zero.
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from tests_support.bad_model_server import good_choice
from tests_support.loopback_app import start_on_loopback


class UpdatingModelServer:
    """`update_s`: how long an update takes; `hold`: when set, an update also waits
    for this event (a test decides when the update ends); `refuse_updates`: an update
    answers 503 after `update_s`, without joining a weight link (a dying replica)."""

    def __init__(self, update_s: float = 0.3, chat_s: float = 0.01) -> None:
        self.update_s = update_s
        self.chat_s = chat_s
        self.hold: asyncio.Event | None = None
        self.refuse_updates = False
        self.version = 0
        self.requests = 0
        self.during_update = 0
        self.updates = 0
        self._done = asyncio.Event()
        self._done.set()
        self.runner: web.AppRunner | None = None
        self.url = ""

    @property
    def updating(self) -> bool:
        return not self._done.is_set()

    async def _chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests += 1
        if self.updating:
            self.during_update += 1
            await self._done.wait()  # as the hf engine's gate: behind the swap
        await asyncio.sleep(self.chat_s)  # the generation
        choices = [good_choice(i) for i in range(int(body.get("n", 1)))]
        return web.json_response({"choices": choices, "prompt_token_ids": [1]},
                                 headers={"x-model-version": str(self.version)})

    async def _health(self, _request: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "version": self.version})

    async def _update(self, request: web.Request) -> web.Response:
        body = await request.json()
        self._done.clear()
        try:
            await asyncio.sleep(self.update_s)  # the transfer
            if self.hold is not None:
                await self.hold.wait()
            if self.refuse_updates:
                return web.json_response({"error": "shutting down"}, status=503)
            self.version = int(body["version"])
            self.updates += 1
        finally:
            self._done.set()
        return web.json_response({"version": self.version})

    async def start(self) -> str:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/health", self._health)
        app.router.add_post("/update_weights", self._update)
        self.runner, self.url = await start_on_loopback(app)
        return self.url

    async def stop(self) -> None:
        self._done.set()
        if self.hold is not None:
            self.hold.set()
        if self.runner is not None:
            runner, self.runner = self.runner, None
            await runner.cleanup()
