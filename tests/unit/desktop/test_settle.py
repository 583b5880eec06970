"""wait_until_settled: stops at the first two equal screenshots, else at max_s."""

from __future__ import annotations

import io
from collections.abc import Iterator

from cua_rl.desktop.settle import is_blank, wait_until_settled


def _shots(frames: list[bytes]) -> tuple[list[int], object]:
    calls: list[int] = []
    it: Iterator[bytes] = iter(frames)

    async def shoot() -> bytes:
        calls.append(1)
        return next(it, frames[-1] + bytes(len(calls)))  # past the script: always new

    return calls, shoot


async def test_settles_at_the_first_two_equal_frames() -> None:
    calls, shoot = _shots([b"black", b"half", b"app", b"app", b"app"])
    done = await wait_until_settled(shoot, max_s=5, interval_s=0.001)
    assert done.settled and done.screenshots == 4 and len(calls) == 4


async def test_gives_up_at_max_s_on_a_screen_that_keeps_changing() -> None:
    calls, shoot = _shots([b"a", b"b"])
    done = await wait_until_settled(shoot, max_s=0.05, interval_s=0.01)
    assert not done.settled
    assert 0.05 <= done.waited_s < 1.0
    assert len(calls) >= 3


def _png(color: tuple[int, int, int], dot: bool = False) -> bytes:
    from PIL import Image

    image = Image.new("RGB", (320, 180), color)
    if dot:  # an app's window: a tenth of the screen in another colour
        image.paste((240, 240, 240), (0, 0, 160, 60))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


async def test_after_opening_an_app_a_blank_screen_is_not_settled() -> None:
    black, window = _png((0, 0, 0)), _png((0, 0, 0), dot=True)
    assert is_blank(black) and not is_blank(window)
    frames = [black, black, black, window, window]
    calls, shoot = _shots(frames)
    done = await wait_until_settled(shoot, max_s=5, interval_s=0.001, drawn=True)
    assert done.settled and len(calls) == 5
    calls, shoot = _shots(frames)
    plain = await wait_until_settled(shoot, max_s=5, interval_s=0.001)
    assert plain.settled and len(calls) == 2  # without `drawn` the blank pair counts
