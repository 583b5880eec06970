"""Async client of one OpenAI-compatible model server (hf engine or vLLM).

Every call has a timeout. Failures are classified for the pool (base.py):
connection errors, timeouts and 5xx raise `InferenceUnavailable`; 4xx raise
`InferenceRequestError`. The client always asks for token ids
(`return_token_ids`, which vLLM honours and the hf engine always does) because
the learner trains on ids, never on re-tokenized text.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from cua_rl.inference.base import (
    ChatResult,
    Choice,
    InferenceRequestError,
    InferenceUnavailable,
)

VERSION_HEADER = "x-model-version"


class InferenceClient:
    """One replica, addressed by its base URL (e.g. `http://10.0.0.5:8000`)."""

    def __init__(
        self,
        base_url: str,
        timeout_s: float = 300.0,
        session: aiohttp.ClientSession | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self._session = session
        self._own_session = session is None

    async def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession()
            self._own_session = True
        return self._session

    async def close(self) -> None:
        if self._own_session and self._session is not None:
            await self._session.close()

    async def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        n: int = 1,
        temperature: float = 1.0,
        top_p: float = 1.0,
        max_tokens: int = 256,
        stop: list[str] | None = None,
        seed: int | None = None,
        tools: list[dict[str, Any]] | None = None,
        model: str | None = None,
        timeout_s: float | None = None,
        extra: dict[str, Any] | None = None,
    ) -> ChatResult:
        """One chat completion with per-token logprobs and ids."""
        body: dict[str, Any] = {
            "messages": messages,
            "n": n,
            "temperature": temperature,
            "top_p": top_p,
            "max_tokens": max_tokens,
            "logprobs": True,
            "return_token_ids": True,
        }
        optional = {"stop": stop, "seed": seed, "tools": tools, "model": model}
        body.update({k: v for k, v in optional.items() if v is not None})
        body.update(extra or {})
        payload, headers = await self._request("POST", "/v1/chat/completions", body, timeout_s)
        return parse_chat_response(payload, headers.get(VERSION_HEADER), self.base_url)

    async def health(self, timeout_s: float = 5.0) -> bool:
        """True if the replica answers `/health` with 200 within the timeout."""
        try:
            await self._request("GET", "/health", None, timeout_s)
        except (InferenceUnavailable, InferenceRequestError):
            return False
        return True

    async def update_weights(self, version: int, path: str, timeout_s: float = 600.0) -> int:
        """Ask the replica to load `path` and serve it as `version`; returns the new version."""
        payload, _ = await self._request(
            "POST", "/update_weights", {"version": version, "path": path}, timeout_s
        )
        return int(payload["version"])

    async def update_weights_collective(
        self, version: int, host: str, port: int, manifest: list[dict[str, Any]],
        timeout_s: float = 600.0,
    ) -> int:
        """Ask the replica to receive `manifest` over a gloo link the caller hosts
        on host:port (the caller broadcasts meanwhile); returns the new version."""
        body = {"version": version,
                "collective": {"host": host, "port": port, "manifest": manifest}}
        payload, _ = await self._request("POST", "/update_weights", body, timeout_s)
        return int(payload["version"])

    async def _request(
        self, method: str, route: str, body: Any, timeout_s: float | None
    ) -> tuple[Any, dict[str, str]]:
        session = await self._get_session()
        url = self.base_url + route
        timeout = aiohttp.ClientTimeout(total=timeout_s or self.timeout_s)
        try:
            async with session.request(method, url, json=body, timeout=timeout) as response:
                text = await response.text()
                headers = {k.lower(): v for k, v in response.headers.items()}
                status = response.status
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise InferenceUnavailable(f"{method} {url} failed: {exc!r}") from exc
        if status >= 500:
            raise InferenceUnavailable(f"{method} {url} -> {status}: {text[:500]}")
        if status >= 400:
            message, param = _error_fields(text)
            raise InferenceRequestError(f"{method} {url} -> {status}: {message}", status, param)
        try:
            return json.loads(text), headers
        except ValueError as exc:
            raise InferenceUnavailable(f"{method} {url}: response is not JSON") from exc


def parse_chat_response(payload: dict[str, Any], version: str | None, url: str = "") -> ChatResult:
    """Turn an OpenAI/vLLM chat completion body into a ChatResult."""
    choices = []
    for raw in payload["choices"]:
        content = ((raw.get("logprobs") or {}).get("content")) or []
        logprobs = tuple(float(entry["logprob"]) for entry in content)
        token_ids = tuple(raw.get("token_ids") or ())
        if token_ids and logprobs and len(token_ids) != len(logprobs):
            raise InferenceUnavailable(
                f"{url}: choice {raw.get('index')} has {len(token_ids)} token ids "
                f"but {len(logprobs)} logprobs"
            )
        choices.append(
            Choice(
                index=int(raw.get("index", len(choices))),
                text=(raw.get("message") or {}).get("content") or "",
                token_ids=token_ids,
                logprobs=logprobs,
                finish_reason=raw.get("finish_reason"),
            )
        )
    return ChatResult(
        choices=tuple(choices),
        model_version=int(version) if version is not None else None,
        prompt_token_ids=tuple(payload.get("prompt_token_ids") or ()),
        url=url,
    )


def _error_fields(text: str) -> tuple[str, str | None]:
    try:
        error = json.loads(text)["error"]
        return str(error.get("message")), error.get("param")
    except (ValueError, KeyError, TypeError, AttributeError):
        return text[:500], None
