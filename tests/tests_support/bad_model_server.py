"""A misbehaving OpenAI-compatible model server on 127.0.0.1 for fault tests.

Each `mode` serves one kind of bad answer a real server (or a proxy in front of
it) can give; `ok` serves a well-formed completion. Requests are counted so a
test can tell whether the client retried.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from tests_support.loopback_app import start_on_loopback

TOOL_CALL = ('<tool_call>{"name": "computer_use", "arguments": {"action": "terminate", '
             '"status": "success"}}</tool_call>')


def good_choice(index: int = 0, text: str = TOOL_CALL) -> dict[str, Any]:
    return {"index": index, "message": {"role": "assistant", "content": text},
            "finish_reason": "stop", "token_ids": [5, 6],
            "logprobs": {"content": [{"token": "a", "logprob": -0.5},
                                     {"token": "b", "logprob": -1.5}]}}


BAD_MODES: dict[str, str] = {
    "wrong_shape": "valid JSON, not a chat completion",
    "empty_choices": "choices: []",
    "bad_version": "x-model-version: 'latest'",
    "missing_logprob": "a logprobs entry without logprob",
    "missing_logprobs": "a choice without logprobs",
    "not_json": "an HTML page with status 200",
    "short_logprobs": "fewer logprobs than token ids",
}
"""Bad answer kinds with status 200 (what the client must turn into ModelResponseError)."""


class BadModelServer:
    """Serves `mode` on /v1/chat/completions; `hang` never answers."""

    def __init__(self, mode: str = "ok") -> None:
        self.mode = mode
        self.requests = 0
        self.runner: web.AppRunner | None = None
        self.url = ""
        self._never = asyncio.Event()

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        body = await request.json()
        n = int(body.get("n", 1))
        headers = {"x-model-version": "1"}
        choices = [good_choice(i) for i in range(n)]
        if self.mode == "hang":
            await self._never.wait()
        if self.mode == "wrong_shape":
            return web.json_response({"result": "ok", "choices": "none"}, headers=headers)
        if self.mode == "empty_choices":
            return web.json_response({"choices": []}, headers=headers)
        if self.mode == "bad_version":
            headers["x-model-version"] = "latest"
        if self.mode == "missing_logprob":
            del choices[0]["logprobs"]["content"][1]["logprob"]
        if self.mode == "missing_logprobs":
            del choices[0]["logprobs"]
        if self.mode == "short_logprobs":
            choices[0]["logprobs"]["content"].pop()
        if self.mode == "not_json":
            return web.Response(text="<html>502 Bad Gateway</html>", headers=headers)
        return web.json_response({"choices": choices, "prompt_token_ids": [1]}, headers=headers)

    async def _health(self, _request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def _update(self, _request: web.Request) -> web.Response:
        return web.json_response({"version": "two"})

    async def start(self) -> str:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/health", self._health)
        app.router.add_post("/update_weights", self._update)
        self.runner, self.url = await start_on_loopback(app)
        return self.url

    async def stop(self) -> None:
        self._never.set()
        if self.runner is not None:
            await self.runner.cleanup()
