"""Waiting for the screen to settle after a task's setup.

Apps draw a blank or half-painted window first (GIMP, VLC, Chrome); OSWorld's
runner waits before its first observation, and so do we: screenshots are taken
every `interval_s` until two consecutive ones are identical, or `max_s` passes.
Screenshots are compared as PNG bytes: the guest's encoder is deterministic, so
equal pixels give equal bytes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Settled:
    """How the wait ended: `settled` False means `max_s` ran out first."""

    settled: bool
    waited_s: float
    screenshots: int


async def wait_until_settled(shoot: Callable[[], Awaitable[bytes]], *, max_s: float,
                             interval_s: float = 0.5) -> Settled:
    """Poll `shoot` until two consecutive results agree or `max_s` has passed.

    Never raises for an unsettled screen (an animation never settles; the
    episode goes on after `max_s`); errors of `shoot` propagate."""
    began = time.monotonic()
    deadline = began + max_s
    previous = await shoot()
    count = 1
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return Settled(False, time.monotonic() - began, count)
        await asyncio.sleep(min(interval_s, remaining))
        current = await shoot()
        count += 1
        if current == previous:
            return Settled(True, time.monotonic() - began, count)
        previous = current
