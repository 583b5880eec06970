"""What callers of the inference protocol see: typed results and errors.

Depends on nothing heavy, so actors, the PRM and the learner can import it
without torch; `ChatBackend` is the shape of a model pool they are written
against (the judge and the rewriter live above rollout, so it is here, not there).
Errors split by what the caller should do: `InferenceUnavailable`
is the replica's fault (connection error, timeout, 5xx) and is retried on
another replica; `InferenceRequestError` is the request's fault (4xx) and is not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from cua_rl.errors import InferenceError, InferenceRequestError, InferenceUnavailable

__all__ = [
    "ChatBackend",
    "ChatResult",
    "Choice",
    "InferenceError",
    "InferenceRequestError",
    "InferenceUnavailable",
]


@dataclass(frozen=True, slots=True)
class Choice:
    """One sampled continuation with its behavior logprobs (one per token id)."""

    index: int
    text: str
    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    finish_reason: str | None


@dataclass(frozen=True, slots=True)
class ChatResult:
    """A chat completion and the weight version that produced it."""

    choices: tuple[Choice, ...]
    model_version: int | None
    """From the `x-model-version` header; None if the server does not send it."""
    prompt_token_ids: tuple[int, ...] = ()
    url: str = ""
    """The replica that served the request."""


class ChatBackend(Protocol):
    """A pool of model replicas (InferencePool has this shape)."""

    async def chat(
        self, messages: list[dict[str, Any]], *, session_key: str | None = None, **kwargs: Any
    ) -> ChatResult: ...

    def end_session(self, session_key: str) -> None: ...
