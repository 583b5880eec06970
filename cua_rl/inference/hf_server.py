"""The `hf` engine's HTTP server: OpenAI-compatible chat completions on transformers.

Routes: `POST /v1/chat/completions` (openai_schema.py), `GET /health`,
`POST /update_weights {version, path}` or `{version, collective: {host, port,
manifest, bucket_bytes}}` (weights broadcast by the learner over a two-party gloo
link in buckets of at most `bucket_bytes`, absent: one tensor each; see
weight_transfer.py; requires `Authorization: Bearer $CUA_RL_MODEL_TOKEN` when the
server was started with that variable, else 401), `GET /v1/models`. Every response
carries `x-model-version`; for a completion it is the version of the weights
that produced every one of its tokens.

Invariants:
- The event loop never runs model code: one worker task takes queued requests,
  batches up to `max_batch_rows` sampled rows into one `HFEngine.generate` call
  and runs it on a single-thread executor.
- No request sees mixed weights: a batch runs under `_gate`, and a weight
  update swaps the model under the same gate (loading the new checkpoint
  happens before, outside the gate, so serving continues while it loads).
- Each accepted request gets exactly one response: its result, a 400 naming the
  bad field, or a 500 if the engine failed.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from cua_rl.errors import RequestError
from cua_rl.inference.hf_engine import GenerationRequest, GenerationResult, HFEngine, load_model
from cua_rl.inference.openai_schema import (
    decode_images,
    error_body,
    logprobs_content,
    parse_request,
)
from cua_rl.inference.owner_watch import exit_when_owner_dies, owner_pid
from cua_rl.inference.sampling import SamplingParams
from cua_rl.inference.server_auth import TOKEN_ENV, admin_allowed, warn_open_admin_routes

log = logging.getLogger(__name__)

VERSION_HEADER = "x-model-version"
DEFAULT_MAX_TOKENS = 256
ADMIN_ROUTES = frozenset({"/update_weights"})
"""Routes that change what the server serves: they require the run's credential."""


@dataclass
class _Pending:
    request: GenerationRequest
    future: asyncio.Future[tuple[GenerationResult, int]] = field(repr=False)


class HFServer:
    """Owns the engine, the request queue, the batching worker and the weight gate."""

    def __init__(
        self,
        engine: HFEngine,
        version: int = 0,
        max_batch_rows: int = 16,
        max_queue: int = 1024,
        model_name: str | None = None,
        token: str | None = None,
    ) -> None:
        """`token`: the credential `/update_weights` requires (None: the route is open)."""
        self.engine = engine
        self.token = token
        self.version = version
        self.max_batch_rows = max_batch_rows
        self.model_name = model_name or engine.model_dir.name
        self._queue: asyncio.Queue[_Pending] = asyncio.Queue(max_queue)
        self._gate = asyncio.Lock()
        self._generate_pool = ThreadPoolExecutor(1, thread_name_prefix="hf-generate")
        self._load_pool = ThreadPoolExecutor(1, thread_name_prefix="hf-load")
        self._worker: asyncio.Task[None] | None = None

    def app(self) -> web.Application:
        app = web.Application(
            middlewares=[self._version_header, self._admin_credential], client_max_size=256 * 2**20
        )
        app.router.add_post("/v1/chat/completions", self.chat_completions)
        app.router.add_get("/health", self.health)
        app.router.add_post("/update_weights", self.update_weights)
        app.router.add_get("/v1/models", self.models)
        app.on_startup.append(self._start)
        app.on_cleanup.append(self._stop)
        return app

    async def _start(self, _app: web.Application) -> None:
        self._worker = asyncio.create_task(self._serve_batches(), name="hf-batch-worker")

    async def _stop(self, _app: web.Application) -> None:
        if self._worker is not None:
            self._worker.cancel()
        self._generate_pool.shutdown(wait=False, cancel_futures=True)
        self._load_pool.shutdown(wait=False, cancel_futures=True)

    @web.middleware
    async def _version_header(self, request: web.Request, handler: Any) -> web.StreamResponse:
        response = await handler(request)
        response.headers.setdefault(VERSION_HEADER, str(self.version))
        return response

    @web.middleware
    async def _admin_credential(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if request.path in ADMIN_ROUTES and not admin_allowed(
            request.headers.get("Authorization"), self.token, request.remote
        ):
            return web.json_response(
                error_body(
                    "missing or wrong credential (Authorization: Bearer <run token>)",
                    "Authorization",
                    "unauthorized",
                ),
                status=401,
            )
        return await handler(request)

    async def health(self, _request: web.Request) -> web.Response:
        return web.json_response(
            {"status": "ok", "version": self.version, "queued": self._queue.qsize()}
        )

    async def models(self, _request: web.Request) -> web.Response:
        model = {"id": self.model_name, "object": "model", "owned_by": "cua-rl"}
        return web.json_response({"object": "list", "data": [model]})

    async def chat_completions(self, request: web.Request) -> web.Response:
        try:
            body = parse_request(await _json(request))
            images = await asyncio.get_running_loop().run_in_executor(None, decode_images, body)
        except RequestError as exc:
            return web.json_response(error_body(exc.message, exc.param), status=400)
        params = SamplingParams(
            n=body.n,
            temperature=body.temperature,
            top_p=body.top_p,
            max_tokens=body.token_budget(DEFAULT_MAX_TOKENS),
            stop=tuple(body.stop or ()),
            seed=body.seed,
        )
        messages = [m.model_dump(exclude_none=True) for m in body.messages]
        pending = _Pending(
            GenerationRequest(messages, images, params, body.tools),
            asyncio.get_running_loop().create_future(),
        )
        try:
            self._queue.put_nowait(pending)
        except asyncio.QueueFull:
            return web.json_response(error_body("server overloaded", None, "overloaded"), 503)
        try:
            result, version = await pending.future
        except RequestError as exc:
            return web.json_response(error_body(exc.message, exc.param), status=400)
        except Exception as exc:  # noqa: BLE001 - answer as JSON; the pool retries elsewhere
            return web.json_response(error_body(str(exc), None, "internal_error"), status=500)
        payload = self._completion_body(result, body.logprobs)
        return web.json_response(payload, headers={VERSION_HEADER: str(version)})

    def _completion_body(self, result: GenerationResult, with_logprobs: bool) -> dict[str, Any]:
        tokenizer = self.engine.tokenizer
        choices = []
        for i, choice in enumerate(result.choices):
            logprobs = None
            if with_logprobs:
                content = logprobs_content(tokenizer, choice.token_ids, choice.logprobs)
                logprobs = {"content": content}
            choices.append(
                {
                    "index": i,
                    "message": {"role": "assistant", "content": choice.text},
                    "finish_reason": choice.finish_reason,
                    "logprobs": logprobs,
                    "token_ids": list(choice.token_ids),
                }
            )
        completion_tokens = sum(len(c.token_ids) for c in result.choices)
        prompt_tokens = len(result.prompt_token_ids)
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model_name,
            "choices": choices,
            "prompt_token_ids": list(result.prompt_token_ids),
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }

    async def update_weights(self, request: web.Request) -> web.Response:
        try:
            body = await _json(request)
            version, source = _update_fields(body)
        except RequestError as exc:
            return web.json_response(error_body(exc.message, exc.param), status=400)
        loop = asyncio.get_running_loop()
        try:
            if isinstance(source, Path):
                model = await loop.run_in_executor(
                    self._load_pool, load_model, source, self.engine.attn_implementation
                )
            else:
                model = await loop.run_in_executor(self._load_pool, self._receive, source)
        except RequestError as exc:
            return web.json_response(error_body(exc.message, exc.param), status=400)
        async with self._gate:  # waits for the running batch; the next one uses new weights
            self.engine.swap_model(model)
            self.version = version
        log.info("weights updated to version %d from %s", version, source)
        return web.json_response({"version": version}, headers={VERSION_HEADER: str(version)})

    async def _serve_batches(self) -> None:
        while True:
            batch = [await self._queue.get()]
            rows = batch[0].request.params.n
            while not self._queue.empty():
                nxt = self._queue._queue[0]  # peek: stop before overflowing the row budget
                if rows + nxt.request.params.n > self.max_batch_rows:
                    break
                batch.append(self._queue.get_nowait())
                rows += nxt.request.params.n
            batch = [p for p in batch if not p.future.done()]  # client went away
            if batch:
                async with self._gate:
                    await self._run(batch, self.version)

    async def _run(self, batch: list[_Pending], version: int) -> None:
        loop = asyncio.get_running_loop()
        try:
            results = await loop.run_in_executor(
                self._generate_pool, self.engine.generate, [p.request for p in batch]
            )
        except Exception as exc:  # noqa: BLE001 - isolate the request that broke the batch
            if len(batch) > 1:
                for pending in batch:
                    await self._run([pending], version)
                return
            _fail(batch[0], exc)
            return
        for pending, result in zip(batch, results, strict=True):
            if not pending.future.done():
                pending.future.set_result((result, version))

    def _receive(self, source: dict[str, Any]) -> Any:
        """A copy of the served model with the broadcast tensors loaded (blocking)."""
        import copy

        from cua_rl.inference import weight_transfer

        items = source["manifest"]
        bucket_bytes = source.get("bucket_bytes", 0)
        try:  # a bad entry is refused before the link is joined
            weight_transfer.bucket_layout(items, bucket_bytes)
        except ValueError as exc:
            raise RequestError("collective.manifest", str(exc)) from None
        known = dict(self.engine.model.named_parameters())
        unknown = [i["name"] for i in items if i["name"] not in known]
        missing = sorted(set(known) - {i["name"] for i in items})
        if unknown or missing:
            raise RequestError(
                "collective.manifest",
                f"expected exactly the model's parameters; "
                f"unknown {unknown[:5]}, missing {missing[:5]}",
            )
        group = weight_transfer.open_link(source["host"], source["port"], rank=1)
        tensors = weight_transfer.receive(group, items, bucket_bytes)
        model = copy.deepcopy(self.engine.model)
        model.load_state_dict(tensors, strict=False)
        return model.eval()


def _fail(pending: _Pending, exc: Exception) -> None:
    if pending.future.done():
        return
    if isinstance(exc, ValueError | TypeError | IndexError):
        # The processor rejects malformed prompts (e.g. image/token mismatch) with these.
        pending.future.set_exception(RequestError("messages", str(exc)))
    else:
        log.exception("generation failed", exc_info=exc)
        pending.future.set_exception(exc)


async def _json(request: web.Request) -> Any:
    try:
        return await request.json()
    except ValueError:
        raise RequestError("body", "expected a JSON body") from None


def _update_fields(body: Any) -> tuple[int, Path | dict[str, Any]]:
    if not isinstance(body, dict):
        raise RequestError(
            "body", "expected a JSON object {version, path} or {version, collective}"
        )
    version = body.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise RequestError("version", "expected an integer")
    if "collective" in body:
        link = body["collective"]
        if (
            not isinstance(link, dict)
            or not isinstance(link.get("host"), str)
            or not isinstance(link.get("port"), int)
            or not isinstance(link.get("manifest"), list)
        ):
            raise RequestError("collective", "expected {host: str, port: int, manifest: list}")
        buckets = link.get("bucket_bytes", 0)
        if not isinstance(buckets, int) or isinstance(buckets, bool) or buckets < 0:
            raise RequestError("collective.bucket_bytes", "expected a non-negative integer")
        return version, link
    path = body.get("path")
    if not isinstance(path, str) or not (Path(path) / "config.json").is_file():
        raise RequestError("path", "expected a checkpoint directory containing config.json")
    return version, Path(path)


def run_hf_server(
    model_dir: str,
    host: str = "127.0.0.1",
    port: int = 8000,
    version: int = 0,
    threads: int | None = None,
    max_batch_rows: int = 16,
) -> None:
    """Load the model and serve until interrupted (the `cua-rl serve --engine hf` body)."""
    import torch

    if threads:
        torch.set_num_threads(threads)
    token = os.environ.get(TOKEN_ENV) or None
    if token is None:
        warn_open_admin_routes()
    server = HFServer(
        HFEngine(model_dir), version=version, max_batch_rows=max_batch_rows, token=token
    )
    app = server.app()
    owner = owner_pid()
    if owner is not None:  # launched by a run: do not outlive it
        watchers: list[asyncio.Task[None]] = []

        async def watch(_app: web.Application) -> None:
            watchers.append(asyncio.create_task(exit_when_owner_dies(owner)))

        async def unwatch(_app: web.Application) -> None:
            for task in watchers:
                task.cancel()

        app.on_startup.append(watch)
        app.on_cleanup.append(unwatch)
    web.run_app(
        app,
        host=host,
        port=port,
        print=lambda _: log.warning("hf engine serving %s on %s:%d", model_dir, host, port),
        access_log=None,
    )
