"""Bearer-token authentication for every route.

The guest can run arbitrary commands on the desktop, so the token is checked on
every request, /healthz included, with a constant-time comparison. The server
refuses to start without a token unless --no-auth is given explicitly.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import web

from cua_guest.bodies import json_error

TOKEN_ENV = "CUA_GUEST_TOKEN"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class TokenError(Exception):
    """No usable token was configured; the message says how to give one."""


def load_token(token_file: str | None, no_auth: bool) -> str | None:
    """The token from --token-file, else $CUA_GUEST_TOKEN; None only with --no-auth."""
    if no_auth:
        return None
    if token_file:
        path = Path(token_file)
        try:
            token = path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise TokenError(f"--token-file {path}: cannot read it ({exc.strerror})") from None
        if not token:
            raise TokenError(f"--token-file {path}: the file is empty; expected a token")
        return token
    token = os.environ.get(TOKEN_ENV, "").strip()
    if token:
        return token
    raise TokenError(
        f"no token: pass --token-file PATH or set {TOKEN_ENV}; "
        "use --no-auth only on a trusted, local-only address"
    )


def auth_middleware(token: str | None) -> Callable[[web.Request, Handler], Awaitable]:
    """Middleware rejecting requests without `Authorization: Bearer <token>` (401)."""
    expected = f"Bearer {token}".encode() if token is not None else None

    @web.middleware
    async def check_token(request: web.Request, handler: Handler) -> web.StreamResponse:
        if expected is not None and not _matches(request, expected):
            return json_error(401, "missing or wrong bearer token (Authorization header)")
        return await handler(request)

    return check_token


def _matches(request: web.Request, expected: bytes) -> bool:
    """Whether the Authorization header is exactly `expected`.

    aiohttp hands over header bytes that are not UTF-8 as surrogate escapes;
    they are turned back into the bytes that were sent, so any malformed value
    is simply a wrong credential (401), never an encoding error (500).
    """
    given = request.headers.get("Authorization", "")
    try:
        raw = given.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return False
    return hmac.compare_digest(raw, expected)
