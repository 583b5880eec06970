"""Async client of one OpenAI-compatible model server (hf engine or vLLM).

Every call has a timeout (connect and total), and a client opens at most
`max_connections` sockets to its server (the pool's bound per replica). Failures
are classified for the pool (base.py): connection errors, timeouts and 5xx raise
`InferenceUnavailable` (another replica may succeed); 4xx raise
`InferenceRequestError`; a 2xx answer we cannot use (not JSON, wrong shape, empty
`choices`, missing logprobs, a non-integer `x-model-version`) raises
`ModelResponseError` naming the server, the request and what was expected. Nothing
else escapes: no KeyError or IndexError from a server's body. The client always
asks for token ids (`return_token_ids`, which vLLM honours and the hf engine always
does) because the learner trains on ids, never on re-tokenized text.
"""

from __future__ import annotations

import ipaddress
import json
import os
from typing import Any

import aiohttp
from pydantic import ValidationError
from yarl import URL

from cua_rl.errors import ConfigError, ModelResponseError
from cua_rl.inference.base import ChatResult, Choice, InferenceRequestError, InferenceUnavailable
from cua_rl.inference.config import InferencePoolConfig
from cua_rl.inference.openai_schema import ChatCompletionResponse, response_problem

VERSION_HEADER = "x-model-version"
CHAT_ROUTE = "/v1/chat/completions"
DEFAULT_TIMEOUT_S = 120.0
"""Total time for one request; see `InferencePoolConfig.request_timeout_s`."""
DEFAULT_CONNECT_TIMEOUT_S = 10.0
"""A replica that does not accept a connection in this time is down, whatever the
total budget (see `InferencePoolConfig.connect_timeout_s`)."""
CONTROL_CONNECTIONS = 4
"""Connections a client keeps beyond its pool's requests in flight, for /health
probes and weight updates: a replica full of requests is still probed."""
DEFAULT_MAX_CONNECTIONS = InferencePoolConfig().max_in_flight_per_replica + CONTROL_CONNECTIONS
"""Sockets one client opens to its server at most (aiohttp's default is 100): a hung
server holds no more of ours than this (`InferencePoolConfig.max_in_flight_per_replica`)."""


PROXY_ENV = "CUA_RL_MODEL_PROXY"
"""A fault-injection hook (like the guest's CUA_GUEST_FAULT_HOOKS): when set, chat
requests go through this HTTP proxy on 127.0.0.1 (`bench soak` puts its fault proxy
there, bench/faults/proxy.py); /health probes and weight updates stay direct."""


def model_proxy(environ: dict[str, str] | None = None) -> str | None:
    """The proxy of `PROXY_ENV`, checked: http on a loopback address, or None."""
    value = (os.environ if environ is None else environ).get(PROXY_ENV, "").strip()
    if not value:
        return None
    try:
        url = URL(value)
        loopback = url.scheme == "http" and ipaddress.ip_address(url.host or "").is_loopback
    except ValueError:
        loopback = False
    if not loopback or url.port is None:
        raise ConfigError(
            f"{PROXY_ENV}={value!r}: expected http://127.0.0.1:PORT (a fault "
            "proxy on loopback), or unset"
        )
    return str(url)


class InferenceClient:
    """One replica, addressed by its base URL (e.g. `http://10.0.0.5:8000`)."""

    def __init__(
        self,
        base_url: str,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        session: aiohttp.ClientSession | None = None,
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
        token: str | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
    ) -> None:
        """`token`: the run's model-server credential, sent on the routes that change
        state (`/update_weights`); None for servers that require none.
        `max_connections`: sockets open to the server at once (more requests wait for
        one), for a session this client makes itself."""
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.max_connections = max_connections
        self._session = session
        self._own_session = session is None
        self._retired: list[aiohttp.ClientSession] = []
        self.proxy = model_proxy()

    def limit_connections(self, limit: int) -> None:
        """Keep at most `limit` sockets open from now on (a pool sets its bound on
        clients made elsewhere, e.g. by the launcher, which may have probed already: a
        session made with another limit is replaced at the next request, and the old
        one, whose requests end on it, is closed with the client)."""
        if limit < 1:
            raise ValueError(f"a client needs at least one connection, got {limit}")
        self.max_connections = limit

    async def _get_session(self) -> aiohttp.ClientSession:
        session = self._session
        if (
            session is not None
            and not session.closed
            and self._own_session
            and session.connector is not None
            and session.connector.limit != self.max_connections
        ):
            self._retired.append(session)
            session = None
        if session is None or session.closed:
            connector = aiohttp.TCPConnector(
                limit=self.max_connections, limit_per_host=self.max_connections
            )
            self._session = session = aiohttp.ClientSession(connector=connector)
            self._own_session = True
        return session

    async def close(self) -> None:
        retired, self._retired = self._retired, []
        for old in retired:
            await old.close()
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
        logprobs: bool = True,
    ) -> ChatResult:
        """One chat completion with per-token logprobs and ids. `logprobs=False` asks
        for text only (choices then carry no ids or logprobs), for callers that read
        answers and train on none of them, e.g. a labelling judge on an endpoint that
        is not ours: a strict OpenAI-compatible API rejects `return_token_ids`."""
        body: dict[str, Any] = {
            "messages": messages,
            "n": n,
            "temperature": temperature,
            "top_p": top_p,
            "max_tokens": max_tokens,
        }
        if logprobs:
            body.update(logprobs=True, return_token_ids=True)
        optional = {"stop": stop, "seed": seed, "tools": tools, "model": model}
        body.update({k: v for k, v in optional.items() if v is not None})
        body.update(extra or {})
        payload, headers = await self._request("POST", CHAT_ROUTE, body, timeout_s)
        request = f"POST {CHAT_ROUTE} (n={n}, max_tokens={max_tokens})"
        return parse_chat_response(
            payload, headers.get(VERSION_HEADER), self.base_url, request, need_logprobs=logprobs
        )

    async def health(self, timeout_s: float = 5.0) -> bool:
        """True if the replica answers `/health` with 200 within the timeout."""
        return await self.health_info(timeout_s) is not None

    async def health_info(self, timeout_s: float = 5.0) -> dict[str, Any] | None:
        """The `/health` body (our servers report `version`), `{}` for a 2xx answer that
        is not a JSON object, None if the replica does not answer 2xx within the timeout."""
        try:
            payload, _ = await self._request("GET", "/health", None, timeout_s)
        except ModelResponseError:
            return {}  # it answered 2xx; a plain vLLM's body is empty
        except (InferenceUnavailable, InferenceRequestError):
            return None
        return payload if isinstance(payload, dict) else {}

    async def update_weights(self, version: int, path: str, timeout_s: float = 600.0) -> int:
        """Ask the replica to load `path` and serve it as `version`; returns the new version."""
        payload, _ = await self._request(
            "POST", "/update_weights", {"version": version, "path": path}, timeout_s, admin=True
        )
        return self._served_version(payload)

    async def update_weights_collective(
        self,
        version: int,
        host: str,
        port: int,
        manifest: list[dict[str, Any]],
        timeout_s: float = 600.0,
        bucket_bytes: int = 0,
    ) -> int:
        """Ask the replica to receive `manifest` over a gloo link the caller hosts
        on host:port (the caller broadcasts meanwhile, cut into buckets of at most
        `bucket_bytes`, `weight_transfer.bucket_layout`); returns the new version."""
        body = {
            "version": version,
            "collective": {
                "host": host,
                "port": port,
                "manifest": manifest,
                "bucket_bytes": bucket_bytes,
            },
        }
        payload, _ = await self._request("POST", "/update_weights", body, timeout_s, admin=True)
        return self._served_version(payload)

    def _served_version(self, payload: Any) -> int:
        version = payload.get("version") if isinstance(payload, dict) else None
        if not isinstance(version, int) or isinstance(version, bool):
            raise ModelResponseError(
                self.base_url,
                "POST /update_weights",
                f'{{"version": <integer>}}, got {str(payload)[:200]}',
            )
        return version

    async def _request(
        self, method: str, route: str, body: Any, timeout_s: float | None, admin: bool = False
    ) -> tuple[Any, dict[str, str]]:
        session = await self._get_session()
        url = self.base_url + route
        total = timeout_s or self.timeout_s
        timeout = aiohttp.ClientTimeout(
            total=total, sock_connect=min(self.connect_timeout_s, total)
        )
        auth = {"Authorization": f"Bearer {self.token}"} if admin and self.token else None
        proxy = self.proxy if route == CHAT_ROUTE else None
        try:
            async with session.request(
                method, url, json=body, timeout=timeout, headers=auth, proxy=proxy
            ) as response:
                text = (await response.read()).decode("utf-8", errors="replace")
                headers = {k.lower(): v for k, v in response.headers.items()}
                status = response.status
        except TimeoutError as exc:
            raise InferenceUnavailable(f"{method} {url}: no answer within {total:g} s") from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise InferenceUnavailable(f"{method} {url} failed: {exc!r}") from exc
        if status >= 500:
            raise InferenceUnavailable(f"{method} {url} -> {status}: {text[:500]}")
        if status >= 400:
            message, param = _error_fields(text)
            raise InferenceRequestError(f"{method} {url} -> {status}: {message}", status, param)
        try:
            return json.loads(text), headers
        except ValueError as exc:
            raise ModelResponseError(
                self.base_url, f"{method} {route}", f"a JSON body, got {text[:80]!r}"
            ) from exc


def parse_chat_response(
    payload: Any,
    version: str | None,
    url: str = "",
    request: str = f"POST {CHAT_ROUTE}",
    *,
    need_logprobs: bool = True,
) -> ChatResult:
    """Turn an OpenAI/vLLM chat completion body into a ChatResult, or raise
    `ModelResponseError` saying what was wrong with it (a choice without logprobs is
    wrong unless `need_logprobs` is False)."""
    if not isinstance(payload, dict):
        raise ModelResponseError(url, request, f"a JSON object, got {type(payload).__name__}")
    try:
        body = ChatCompletionResponse.model_validate(payload)
    except ValidationError as exc:
        raise ModelResponseError(
            url, request, f"a chat completion with logprobs; bad field {response_problem(exc)}"
        ) from None
    choices = []
    for i, raw in enumerate(body.choices):
        if raw.logprobs is None and need_logprobs:
            raise ModelResponseError(
                url,
                request,
                f"a chat completion with logprobs; bad field choices.{i}.logprobs (Field required)",
            )
        # text only: whatever ids or logprobs a server sends anyway are not read
        read = raw.logprobs if need_logprobs else None
        logprobs = tuple(entry.logprob for entry in read.content) if read else ()
        token_ids = tuple(raw.token_ids or ()) if need_logprobs else ()
        if token_ids and len(token_ids) != len(logprobs):
            raise ModelResponseError(
                url,
                request,
                f"one logprob per token id in choices.{i}, got "
                f"{len(token_ids)} token ids and {len(logprobs)} logprobs",
            )
        choices.append(
            Choice(
                index=i if raw.index is None else raw.index,
                text=raw.message.content or "",
                token_ids=token_ids,
                logprobs=logprobs,
                finish_reason=raw.finish_reason,
            )
        )
    return ChatResult(
        choices=tuple(choices),
        model_version=_version(version, url, request),
        prompt_token_ids=tuple(body.prompt_token_ids or ()),
        url=url,
    )


def _version(header: str | None, url: str, request: str) -> int | None:
    if header is None:
        return None
    try:
        return int(header)
    except ValueError:
        raise ModelResponseError(
            url, request, f"an integer {VERSION_HEADER} header, got {header[:40]!r}"
        ) from None


def _error_fields(text: str) -> tuple[str, str | None]:
    try:
        error = json.loads(text)["error"]
        return str(error.get("message")), error.get("param")
    except (ValueError, KeyError, TypeError, AttributeError):
        return text[:500], None
