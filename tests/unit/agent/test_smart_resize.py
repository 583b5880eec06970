"""smart_resize / encode_image: multiples of 32, pixel bounds, aspect kept, parity
with qwen_vl_utils, and data URLs that decode to the resized size."""

from __future__ import annotations

import base64
import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from cua_rl.agent.images import (
    DEFAULT_MAX_PIXELS,
    DEFAULT_MIN_PIXELS,
    FACTOR,
    encode_image,
    resized_image_size,
    smart_resize,
)

sides = st.integers(16, 8000)
# Upstream rounding can overshoot a bound when min and max are close together, so the
# property test keeps them >= 4x apart, as every real configuration is.
bounds = st.tuples(st.integers(4, 64), st.integers(256, 16384)).map(
    lambda b: (b[0] * FACTOR * FACTOR, b[1] * FACTOR * FACTOR)
)


@settings(max_examples=300, deadline=None)
@given(height=sides, width=sides, pixel_bounds=bounds)
def test_smart_resize_properties(height: int, width: int, pixel_bounds: tuple[int, int]) -> None:
    if max(height, width) / min(height, width) > 10:
        return  # extreme strips are covered by the parity test, not bound by min/max
    min_pixels, max_pixels = pixel_bounds
    h, w = smart_resize(height, width, FACTOR, min_pixels, max_pixels)
    assert h % 32 == 0 and w % 32 == 0 and h >= 32 and w >= 32
    assert h * w <= max_pixels
    assert h * w >= min_pixels
    # rounding to 32 moves each side by at most 32 (plus the scale), so the ratio stays close
    assert abs((w / h) - (width / height)) <= (width / height) * (64 / min(h, w))


def test_common_screens() -> None:
    assert resized_image_size((1920, 1080)) == (1504, 832)
    assert resized_image_size((1280, 720)) == (1280, 704)
    assert resized_image_size((1024, 768)) == (1024, 768)


def test_rejects_degenerate_sizes() -> None:
    with pytest.raises(ValueError):
        smart_resize(0, 100)
    with pytest.raises(ValueError):
        smart_resize(10, 5000)
    with pytest.raises(ValueError):
        smart_resize(100, 100, min_pixels=10, max_pixels=5)


@settings(max_examples=300, deadline=None)
@given(height=st.integers(1, 6000), width=st.integers(1, 6000), pixel_bounds=bounds)
def test_parity_with_qwen_vl_utils(height: int, width: int, pixel_bounds: tuple[int, int]) -> None:
    vision_process = pytest.importorskip("qwen_vl_utils.vision_process")
    if max(height, width) / min(height, width) > 200:
        return
    min_pixels, max_pixels = pixel_bounds
    theirs = vision_process.smart_resize(height, width, FACTOR, min_pixels, max_pixels)
    if min(theirs) < FACTOR:
        return  # they return a zero side for extreme strips; we keep one factor
    assert smart_resize(height, width, FACTOR, min_pixels, max_pixels) == theirs


def _png(width: int, height: int, mode: str = "RGB") -> bytes:
    buffer = io.BytesIO()
    Image.new(mode, (width, height), "white").save(buffer, format="PNG")
    return buffer.getvalue()


def _decode(url: str) -> Image.Image:
    header, payload = url.split(",", 1)
    assert header.startswith("data:image/") and header.endswith(";base64")
    return Image.open(io.BytesIO(base64.b64decode(payload)))


def test_encode_image_resizes() -> None:
    url = encode_image(_png(1920, 1080))
    assert url.startswith("data:image/png;base64,")
    assert _decode(url).size == (1504, 832)


def test_encode_image_passes_through_when_already_sized() -> None:
    data = _png(1024, 768)
    url = encode_image(data)
    assert base64.b64decode(url.split(",", 1)[1]) == data


def test_encode_image_to_jpeg_from_rgba() -> None:
    url = encode_image(_png(640, 480, "RGBA"), fmt="jpeg")
    assert url.startswith("data:image/jpeg;base64,")
    image = _decode(url)
    assert image.format == "JPEG" and image.size == (640, 480)


def test_encode_image_respects_max_pixels() -> None:
    url = encode_image(_png(1920, 1080), max_pixels=256 * FACTOR * FACTOR)
    width, height = _decode(url).size
    assert width * height <= 256 * FACTOR * FACTOR and width % 32 == 0 and height % 32 == 0


def test_defaults_are_sane() -> None:
    assert DEFAULT_MIN_PIXELS < DEFAULT_MAX_PIXELS


def test_png_passthrough_matches_encode_image() -> None:
    import io

    from PIL import Image

    from cua_rl.agent.images import encode_image, png_passthrough_url

    def png(size: tuple[int, int]) -> bytes:
        buf = io.BytesIO()
        Image.new("RGB", size, "navy").save(buf, format="PNG")
        return buf.getvalue()

    fits = png((256, 256))
    assert png_passthrough_url(fits) == encode_image(fits)
    assert png_passthrough_url(png((1920, 1080))) is None  # needs a resize
    assert png_passthrough_url(b"\xff\xd8jpeg") is None
