"""The model servers' credential check, shared by the hf engine and (as a copy, see
vllm_side/cua_rl_vllm.py) the vLLM middleware.

Routes that change what a server serves (`/update_weights`) require the run's token
as `Authorization: Bearer <token>`; a run always sets one (launcher.py). A server
started by hand without one keeps those routes open to loopback clients only, and
says so.
"""

from __future__ import annotations

import hmac
import ipaddress
import sys

TOKEN_ENV = "CUA_RL_MODEL_TOKEN"
"""Environment variable holding the credential a model server requires on the routes
that change state; passed in the environment, never argv (the process table is public)."""


def admin_allowed(header: str | None, token: str | None, peer: str | None) -> bool:
    """Whether a state-changing request may proceed: with a token, only if `header` is
    `Bearer <token>` (constant-time compare; anything malformed is simply wrong);
    without one, only from a loopback peer."""
    if token is None:
        return _loopback(peer)
    if not header or not header.startswith("Bearer "):
        return False
    given = header.removeprefix("Bearer ").strip()
    try:
        return hmac.compare_digest(given.encode("utf-8"), token.encode("utf-8"))
    except UnicodeEncodeError:
        return False


def _loopback(peer: str | None) -> bool:
    try:
        return peer is not None and ipaddress.ip_address(peer).is_loopback
    except ValueError:
        return False


def warn_open_admin_routes() -> None:
    """The one warning of a server started without a credential."""
    print(
        f"cua-rl serve: warning: {TOKEN_ENV} is not set, so /update_weights takes no "
        "credential and answers loopback clients only: any local process can replace "
        "the served weights",
        file=sys.stderr,
        flush=True,
    )
