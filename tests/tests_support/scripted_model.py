"""A scripted model server at the inference boundary.

The tiny random model cannot write a critique or a valid rewrite, so tests that
need meaningful reward-model, critic or rewriter answers serve them from this
OpenAI-compatible HTTP server (same protocol, headers and shapes as our hf
engine). Every request is recorded so a test can read the prompts it received.
"""

from __future__ import annotations

import json
import socket
from typing import Any

from aiohttp import web

STEP_REASONING = "The agent typed into the wrong window. \\boxed{-1}"
STEP_SUMMARY = "\\boxed{The agent typed into the wrong window instead of the terminal.}"
TRAJ_SUMMARY = "\\boxed{The agent repeatedly targets the wrong window.}"


REWRITE_MARK = "You adapt the difficulty of a task"
TRAJECTORY_MARK = "JSON list of summaries"
STEP_MARK = "at least one judgement scored it as bad"
"""Phrases of the rewriter and critique prompts (cua_rl.agent.prompts) that tell the
roles apart; everything else is a reward-model request."""


def answer_for(messages: list[dict[str, Any]], names: list[str]) -> str:
    text = json.dumps(messages)
    if REWRITE_MARK in text:
        return json.dumps({names[0]: "Create the file hello.txt. Hint: open a terminal first."})
    if TRAJECTORY_MARK in text:
        return TRAJ_SUMMARY
    if STEP_MARK in text:
        return STEP_SUMMARY
    return STEP_REASONING


class ScriptedModelServer:
    def __init__(self, template_names: list[str]) -> None:
        self.names = template_names
        self.requests: list[list[dict[str, Any]]] = []
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def _chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(body["messages"])
        text = answer_for(body["messages"], self.names)
        choices = [{"index": i, "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop", "token_ids": [1, 2],
                    "logprobs": {"content": [{"token": "a", "logprob": -0.1, "bytes": None,
                                              "top_logprobs": []}] * 2}}
                   for i in range(body.get("n", 1))]
        return web.json_response({"id": "x", "object": "chat.completion", "choices": choices,
                                  "prompt_token_ids": [1]},
                                 headers={"x-model-version": "0"})

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def start(self) -> str:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/health", self._health)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        await web.TCPSite(self.runner, "127.0.0.1", port).start()
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
