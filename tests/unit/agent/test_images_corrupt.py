"""Screenshot bytes that do not decode become CorruptImageError, whatever the path."""

from __future__ import annotations

import io

import pytest

from cua_rl.agent.images import encode_image, png_passthrough_url
from cua_rl.errors import CorruptImageError, GuestError


def _image(size: tuple[int, int], fmt: str) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", size, (10, 200, 30)).save(buffer, format=fmt)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("size", "fmt"),
    [((1920, 1080), "PNG"), ((1920, 1080), "JPEG"), ((256, 256), "PNG"), ((256, 256), "JPEG")],
)
def test_truncated_screenshot_is_a_guest_error(size, fmt) -> None:
    data = _image(size, fmt)
    encode_image(data)  # whole: fine
    with pytest.raises(CorruptImageError, match="bytes") as caught:
        encode_image(data[: len(data) * 2 // 3])
    assert isinstance(caught.value, GuestError)  # aborts the episode like a dead desktop


def test_garbage_and_passthrough() -> None:
    with pytest.raises(CorruptImageError):
        encode_image(b"<html>not an image</html>")
    png = _image((256, 256), "PNG")
    assert png_passthrough_url(png) is not None
    with pytest.raises(CorruptImageError, match="truncated"):
        png_passthrough_url(png[:-20])
