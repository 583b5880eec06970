"""The one retry policy of cua-rl, built on tenacity.

Every retry loop of cua-rl, evaluation getters included, goes through
`retrying` (async) so that they agree on three things: only errors that can
succeed on retry are retried (the caller names them with `retry_on`; anything
else propagates at once), attempts and backoff are bounded (exponential with
full jitter, capped: clients that failed together do not retry together), and
each retry is logged with what failed. The last error is re-raised as it was,
so callers translate it into their own typed error exactly once.

tenacity rather than a loop of our own: it is maintained, small (pure Python,
no dependencies) and already handles the edge cases (async sleep, attempt
bookkeeping, re-raising the original exception).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_random_exponential,
)

log = logging.getLogger(__name__)


def retrying(
    what: str,
    *,
    attempts: int,
    retry_on: Callable[[BaseException], bool],
    backoff_s: float = 0.5,
    max_backoff_s: float = 30.0,
    delay: Callable[[int], float] | None = None,
    sleep: Callable[[float], Awaitable[Any]] | None = None,
) -> AsyncRetrying:
    """An `async for attempt in retrying(...): with attempt: ...` loop.

    `what` names the operation in log lines ("download of URL"); `retry_on` says
    which exceptions a retry can cure (a throttled API, a dropped connection),
    never local faults such as a full disk. `delay(i)` replaces the default
    backoff before retry i (0-based); `sleep` lets tests skip the waits.
    """

    def before_sleep(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        delay = state.next_action.sleep if state.next_action else 0.0
        log.warning(
            "%s failed (%s); retry %d/%d in %.2f s",
            what,
            _describe(exc),
            state.attempt_number,
            attempts - 1,
            delay,
        )

    kwargs: dict[str, Any] = {}
    if sleep is not None:
        kwargs["sleep"] = sleep
    wait: Any = wait_random_exponential(multiplier=backoff_s, max=max_backoff_s)
    if delay is not None:
        wait = lambda state: delay(state.attempt_number - 1)  # noqa: E731
    return AsyncRetrying(
        stop=stop_after_attempt(attempts),
        wait=wait,
        retry=retry_if_exception(retry_on),
        before_sleep=before_sleep,
        reraise=True,
        **kwargs,
    )


def _describe(exc: BaseException | None) -> str:
    if exc is None:
        return "?"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
