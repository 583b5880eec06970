"""One configurable OpenAI-compatible model server on 127.0.0.1 for tests.

Tests need model servers that answer in a known way: scripted answers a tiny random
model cannot give, bad answers a real server (or a proxy in front of it) can give,
generation that takes time, a failing /health, weight updates that take time, wait
for the test, or are refused. One server covers all of them; each test states what
it needs in a `FakeModelConfig` (read per request, so a test may change it while the
server runs), as Gymnasium's tests share one configurable `GenericTestEnv`. What the
answers say comes from the builders in tests_support/fake_answers.py.

The server records every request body, so a test can read the prompts and sampling
parameters it received and tell whether the client retried. `HungServer` is the
other end of the scale: a process wedged below HTTP that answers nothing at all.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

from aiohttp import web

from tests_support.fake_answers import OK, AnswerFn, always, render
from tests_support.loopback_app import start_on_loopback

HANG = "hang"
"""As `FakeModelConfig.fault`: chat requests are read but never answered (until stop)."""


@dataclass
class FakeModelConfig:
    """How one fake model server behaves. Defaults: a healthy server at version 0 that
    answers every choice with a terminate call at once and applies updates at once."""

    answer: AnswerFn = field(default_factory=always)
    """Builds each chat answer from the request (tests_support/fake_answers.py)."""
    fault: str = OK
    """Spoils every chat answer: a `BAD_MODES` kind, or `HANG` to answer none."""
    version: int = 0
    """The weights version served until an update (`x-model-version`, /health)."""
    chat_s: float = 0.0
    """How long a generation takes, in seconds."""
    healthy: bool = True
    """False: /health answers 503, as a replica that is up but not ready."""
    update: Literal["apply", "refuse", "garble"] = "apply"
    """What /update_weights does: take the new version; answer 503 after `update_s`
    without taking it (a dying replica); or answer at once with a version that is not
    a number (a server whose update protocol differs)."""
    update_s: float = 0.0
    """How long an update takes, in seconds; chat requests that arrive meanwhile wait
    behind it, as behind the hf engine's gate."""


class FakeModelServer:
    """Serves /v1/chat/completions, /health and /update_weights as `config` says.

    Counters for tests: `bodies` (every chat request body, in order), `asked` (chat
    answers per answer key), `updates` (updates taken), `during_update` (chat requests
    that arrived while an update ran: a staggered sync must leave it at zero). `hold`,
    when set to an event, makes an update also wait for it (the test decides when the
    update ends)."""

    def __init__(self, config: FakeModelConfig | None = None) -> None:
        self.config = config if config is not None else FakeModelConfig()
        self.version = self.config.version
        self.bodies: list[dict[str, Any]] = []
        self.asked: Counter[str] = Counter()
        self.updates = 0
        self.during_update = 0
        self.hold: asyncio.Event | None = None
        self.runner: web.AppRunner | None = None
        self.url = ""
        self._done = asyncio.Event()
        self._done.set()
        self._stopping = asyncio.Event()

    @property
    def requests(self) -> int:
        """How many chat requests arrived."""
        return len(self.bodies)

    @property
    def last_body(self) -> dict[str, Any]:
        return self.bodies[-1] if self.bodies else {}

    @property
    def messages(self) -> list[list[dict[str, Any]]]:
        """Every chat request's messages, in order."""
        return [body["messages"] for body in self.bodies]

    @property
    def params(self) -> list[dict[str, Any]]:
        """Every chat request's body without its messages (sampling parameters, seed)."""
        return [{k: v for k, v in body.items() if k != "messages"} for body in self.bodies]

    @property
    def updating(self) -> bool:
        return not self._done.is_set()

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        turn = len(self.bodies)
        self.bodies.append(body)
        if self.updating:
            self.during_update += 1
            await self._done.wait()
        if self.config.fault == HANG:
            await self._stopping.wait()
            raise web.HTTPServiceUnavailable(text="stopping")
        if self.config.chat_s:
            await asyncio.sleep(self.config.chat_s)  # the generation
        answer = self.config.answer(body, turn)
        self.asked[answer.key] += 1
        fault = answer.fault if answer.fault != OK else self.config.fault
        return render(answer, self.version, fault)

    async def _health(self, _request: web.Request) -> web.Response:
        if not self.config.healthy:
            return web.json_response({"status": "starting"}, status=503)
        return web.json_response({"status": "ok", "version": self.version})

    async def _update(self, request: web.Request) -> web.Response:
        if self.config.update == "garble":
            return web.json_response({"version": "two"})
        body = await request.json()
        self._done.clear()
        try:
            await asyncio.sleep(self.config.update_s)  # the transfer
            if self.hold is not None:
                await self.hold.wait()
            if self.config.update == "refuse":
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
        """Release every waiting request and close the server (twice is harmless)."""
        self._stopping.set()
        self._done.set()
        if self.hold is not None:
            self.hold.set()
        if self.runner is not None:
            runner, self.runner = self.runner, None
            await runner.cleanup()


class HungServer:
    """Accepts every TCP connection on 127.0.0.1 and reads what comes, but answers
    nothing, not even /health: a model server whose process is stopped or wedged
    below HTTP. Counts the connections it accepted and those still open."""

    def __init__(self) -> None:
        self.accepted = 0
        self.open = 0
        self._writers: list[asyncio.StreamWriter] = []
        self._server: asyncio.Server | None = None
        self.url = ""

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
        return self.url

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        self.open += 1
        self._writers.append(writer)
        try:
            while await reader.read(65536):
                pass
        except ConnectionError:
            pass
        finally:
            self.open -= 1

    async def stop(self) -> None:
        for writer in self._writers:
            writer.close()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
