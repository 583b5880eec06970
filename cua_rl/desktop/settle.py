"""Waiting for the screen to settle after a task's setup.

Apps draw a blank or half-painted window first (GIMP, VLC, Chrome); OSWorld's
runner waits before its first observation, and so do we: screenshots are taken
every `interval_s` until two consecutive ones are identical, or `max_s` passes.
Screenshots are compared as PNG bytes: the guest's encoder is deterministic, so
equal pixels give equal bytes.
"""

from __future__ import annotations

import asyncio
import io
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

OPENING_STEPS = frozenset({"launch", "open", "chrome_open_tabs"})
"""Setup steps that put an app on screen: after them a blank screen is not settled."""
BLANK_SHARE = 0.995
"""A screen whose most common colour covers this share of its pixels is blank."""


@dataclass(frozen=True, slots=True)
class Settled:
    """How the wait ended: `settled` False means `max_s` ran out first."""

    settled: bool
    waited_s: float
    screenshots: int


def is_blank(png: bytes) -> bool:
    """One colour covers (almost) the whole screen: nothing has been drawn yet."""
    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        small = image.convert("RGB").resize((192, 108))
    counts = small.getcolors(192 * 108) or []
    return bool(counts) and max(c for c, _ in counts) >= BLANK_SHARE * 192 * 108


async def wait_until_settled(
    shoot: Callable[[], Awaitable[bytes]],
    *,
    max_s: float,
    interval_s: float = 0.5,
    drawn: bool = False,
) -> Settled:
    """Poll `shoot` until two consecutive results agree or `max_s` has passed.

    With `drawn` (the setup opened an app), two blank screens do not count as
    settled: an app that has not painted yet shows a stable, empty screen.
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
        if current == previous and not (drawn and is_blank(current)):
            return Settled(True, time.monotonic() - began, count)
        previous = current
