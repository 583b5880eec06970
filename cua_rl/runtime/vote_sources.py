"""Where `cua-rl eval-prm` gets votes: a reward model it starts, or a running server.

- `started_model`: a checkpoint folder (or `tiny`) served on this machine by the
  project's own replica launcher (`inference.launcher.replica_set`: supervised
  replicas, restarted if they die, stopped on exit), asked through an
  `InferencePool` (its failover and retries).
- `running_server`: any OpenAI-compatible endpoint already up (vLLM, `cua-rl serve`,
  a hosted API). Asked through one `InferenceClient` with our retry policy, not a
  pool: a pool takes a failed replica out of routing until it answers `GET
  /health`, which an endpoint that is not ours may not serve at all.

Both ask text-only (no logprobs, no token ids: nothing here is trained on, and a
strict OpenAI API rejects `return_token_ids`) for `n = m` votes in one request, as
the streaming judge does, and check that m answers came back. `identify` says who
answers, what the vote cache keys its answers by (runtime/vote_cache.py), before
anything is started.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from cua_rl.errors import ModelResponseError
from cua_rl.inference.base import ChatResult, InferenceUnavailable
from cua_rl.inference.client import CHAT_ROUTE, InferenceClient
from cua_rl.inference.config import TINY, InferencePoolConfig, ModelServersConfig
from cua_rl.inference.launcher import (
    default_tiny_dir,
    ensure_tiny_model,
    replica_set,
    resolve_model,
)
from cua_rl.inference.pool import InferencePool
from cua_rl.retry import retrying


@dataclass(frozen=True, slots=True)
class VoteSettings:
    """How one step is asked: m votes sampled at `temperature`, `max_tokens` each."""

    votes: int
    temperature: float
    max_tokens: int


class VoteSource(Protocol):
    """Something that answers a reward-model prompt with m texts."""

    requests: int
    """Requests sent (retries included)."""

    async def ask(
        self, messages: list[dict[str, Any]], settings: VoteSettings
    ) -> tuple[str, ...]: ...


def checked_texts(result: ChatResult, settings: VoteSettings, where: str) -> tuple[str, ...]:
    """The m answers' texts; a server that sent another number of choices (one that
    ignores `n`) is a bad answer, named."""
    if len(result.choices) != settings.votes:
        raise ModelResponseError(
            where,
            f"POST {CHAT_ROUTE} (n={settings.votes})",
            f"{settings.votes} choices (one per vote), got {len(result.choices)}",
        )
    return tuple(choice.text for choice in result.choices)


def folder_fingerprint(path: Path) -> str:
    """A cheap fingerprint of a checkpoint folder: its files' names, sizes and
    modification times (hashing weights of gigabytes would take minutes). Another
    export into the same folder changes it, so cached votes are not reused for it."""
    entries = sorted(
        (e.name, e.stat().st_size, e.stat().st_mtime_ns) for e in os.scandir(path) if e.is_file()
    )
    return hashlib.sha256(repr(entries).encode()).hexdigest()[:16]


def model_identity(model: str, engine: str) -> dict[str, Any]:
    """Who a started model is: its folder (resolved) and that folder's fingerprint, or
    a hub id as given (vllm), with the engine that serves it."""
    folder = Path(model)
    if not folder.is_dir():
        return {"model": model, "engine": engine}
    return {"model": str(folder.resolve()), "engine": engine, "files": folder_fingerprint(folder)}


@dataclass
class PoolSource:
    """Votes from replicas this process started."""

    pool: InferencePool
    requests: int = 0

    async def ask(self, messages: list[dict[str, Any]], settings: VoteSettings) -> tuple[str, ...]:
        self.requests += 1
        result = await self.pool.chat(
            messages,
            n=settings.votes,
            temperature=settings.temperature,
            max_tokens=settings.max_tokens,
            logprobs=False,
        )
        return checked_texts(result, settings, result.url)


@dataclass
class ServerSource:
    """Votes from an OpenAI-compatible endpoint someone else runs."""

    client: InferenceClient
    served_name: str | None
    attempts: int = 3
    requests: int = 0

    async def ask(self, messages: list[dict[str, Any]], settings: VoteSettings) -> tuple[str, ...]:
        url = self.client.base_url
        async for attempt in retrying(
            f"votes from {url}",
            attempts=self.attempts,
            retry_on=lambda e: isinstance(e, InferenceUnavailable),
        ):
            with attempt:
                self.requests += 1
                result = await self.client.chat(
                    messages,
                    n=settings.votes,
                    temperature=settings.temperature,
                    max_tokens=settings.max_tokens,
                    model=self.served_name,
                    logprobs=False,
                )
        return checked_texts(result, settings, url)


@dataclass(frozen=True)
class ModelSpec:
    """Which model answers: a folder or `tiny` started here (`model`), or a running
    server (`url`, with the name it serves the model under)."""

    model: str | None = None
    url: str | None = None
    served_name: str | None = None
    engine: Literal["hf", "vllm"] = "hf"
    replicas: int = 1
    threads: int = 1

    def servers(self) -> ModelServersConfig:
        assert self.model is not None
        return ModelServersConfig(
            engine=self.engine, model=self.model, replicas=self.replicas, threads=self.threads
        )


def base_url(url: str) -> str:
    """A server's base URL (a trailing slash or /v1 is accepted)."""
    base = url.rstrip("/")
    return base[: -len("/v1")] if base.endswith("/v1") else base


async def identify(spec: ModelSpec) -> dict[str, Any]:
    """Who answers, as the vote cache keys it, known before anything starts (so a rerun
    whose votes are all cached starts no model). A running server is its served
    model's name when given (the same model behind another address reuses its
    votes), else its URL; a started model is its folder and that folder's
    fingerprint (`tiny` is built first if it was never built)."""
    if spec.url is not None:
        return (
            {"served_name": spec.served_name} if spec.served_name else {"url": base_url(spec.url)}
        )
    cfg = spec.servers()
    if cfg.model == TINY:
        await ensure_tiny_model(default_tiny_dir())
    return await asyncio.to_thread(
        model_identity, resolve_model(cfg, default_tiny_dir()), spec.engine
    )


def connect(
    spec: ModelSpec, *, log_dir: Path, request_timeout_s: float, name: str
) -> contextlib.AbstractAsyncContextManager[VoteSource]:
    """The votes of `spec` while the context is open: its replicas started (and
    stopped on exit), or its server reached."""
    if spec.url is not None:
        return running_server(spec.url, spec.served_name, request_timeout_s=request_timeout_s)
    return started_model(spec, log_dir=log_dir, request_timeout_s=request_timeout_s, name=name)


@contextlib.asynccontextmanager
async def started_model(
    spec: ModelSpec, *, log_dir: Path, request_timeout_s: float, name: str = "prm"
) -> AsyncIterator[PoolSource]:
    """`spec.model` (a folder, `tiny`, or for vllm a hub id) served by its replicas
    through the project's launcher while the context is open; stopped on exit."""
    cfg = spec.servers().model_copy(
        update={"requests": InferencePoolConfig(request_timeout_s=request_timeout_s)}
    )
    async with replica_set(cfg, name=name, log_dir=log_dir) as started:
        pool = InferencePool(started, cfg.requests)
        try:
            yield PoolSource(pool)
        finally:
            await pool.close()


@contextlib.asynccontextmanager
async def running_server(
    url: str, served_name: str | None, *, request_timeout_s: float, attempts: int = 3
) -> AsyncIterator[ServerSource]:
    """The endpoint at `url`, asked with our retry policy (see module doc)."""
    client = InferenceClient(base_url(url), request_timeout_s)
    try:
        yield ServerSource(client, served_name, attempts)
    finally:
        await client.close()
