"""Screenshot resizing as Qwen3-VL sees images, and data-URL encoding.

Qwen3-VL cuts images into 16-pixel patches and merges 2x2 of them into one
token, so both sides must be multiples of 32; the pixel count is kept inside
[min_pixels, max_pixels] with the aspect ratio preserved as closely as possible.
We resize on the host before sending so that (1) absolute coordinates refer to a
size we know (`resized_image_size`) and (2) the bytes on the wire are no larger
than what the model will use.

`smart_resize` reproduces `qwen_vl_utils.smart_resize` rounding exactly (a unit
test checks parity) instead of calling it, because importing qwen_vl_utils
imports torch and torchvision (seconds, gigabytes) and actors must stay light.
"""

from __future__ import annotations

import base64
import io
import math
from typing import Literal

from cua_rl.errors import CorruptImageError

PATCH_SIZE = 16
MERGE_SIZE = 2
FACTOR = PATCH_SIZE * MERGE_SIZE
DEFAULT_MIN_PIXELS = 64 * FACTOR * FACTOR
"""65,536 pixels: Qwen3-VL's processor default (`shortest_edge`)."""
DEFAULT_MAX_PIXELS = 1280 * FACTOR * FACTOR
"""1,310,720 pixels (1280 visual tokens): what OSWorld's Qwen3-VL agent uses; a
1920x1080 screen becomes 1504x832."""
MAX_ASPECT_RATIO = 200

ImageFormat = Literal["keep", "png", "jpeg"]


def smart_resize(
    height: int,
    width: int,
    factor: int = FACTOR,
    min_pixels: int = DEFAULT_MIN_PIXELS,
    max_pixels: int = DEFAULT_MAX_PIXELS,
) -> tuple[int, int]:
    """(height, width) rounded to multiples of `factor` with the pixel count in bounds.

    Argument order and result match qwen_vl_utils.smart_resize (height first).
    """
    if height <= 0 or width <= 0:
        raise ValueError(f"image size must be positive, got {width}x{height}")
    if max_pixels < min_pixels:
        raise ValueError(f"max_pixels {max_pixels} < min_pixels {min_pixels}")
    if max(height, width) / min(height, width) > MAX_ASPECT_RATIO:
        raise ValueError(f"aspect ratio of {width}x{height} exceeds {MAX_ASPECT_RATIO}")
    h_bar = max(factor, round(height / factor) * factor)
    w_bar = max(factor, round(width / factor) * factor)
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def resized_image_size(
    size: tuple[int, int],
    min_pixels: int = DEFAULT_MIN_PIXELS,
    max_pixels: int = DEFAULT_MAX_PIXELS,
) -> tuple[int, int]:
    """(width, height) the model sees for an image of `size` (width, height).

    This is the `image_size` to pass to `parse_response` for absolute coordinates.
    """
    height, width = smart_resize(size[1], size[0], FACTOR, min_pixels, max_pixels)
    return width, height


def encode_image(
    data: bytes,
    *,
    min_pixels: int = DEFAULT_MIN_PIXELS,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    fmt: ImageFormat = "keep",
    jpeg_quality: int = 90,
) -> str:
    """A `data:` URL of the screenshot `data` (PNG or JPEG bytes), smart-resized.

    When no resize is needed and the format is kept, the original bytes are sent
    as they are: re-encoding a 1080p PNG costs ~70 ms per step for nothing.
    Bytes that do not decode (truncated, not an image) raise `CorruptImageError`:
    they come from a desktop, and a bad one aborts only its episode.
    """
    try:
        return _encode(data, min_pixels, max_pixels, fmt, jpeg_quality)
    except (OSError, SyntaxError, ValueError, EOFError) as exc:
        # PIL reports damage as OSError ("image file is truncated"),
        # UnidentifiedImageError (an OSError), SyntaxError ("broken PNG file") or
        # ValueError/EOFError, depending on where the bytes end.
        raise CorruptImageError(
            f"screenshot of {len(data)} bytes does not decode as PNG/JPEG: {exc}"
        ) from exc


def _encode(
    data: bytes, min_pixels: int, max_pixels: int, fmt: ImageFormat, jpeg_quality: int
) -> str:
    from PIL import Image  # late: only actors that encode pay for PIL

    with Image.open(io.BytesIO(data)) as image:
        source_format = (image.format or "PNG").lower()
        target = source_format if fmt == "keep" else fmt
        if target not in ("png", "jpeg"):
            target = "png"
        width, height = resized_image_size(image.size, min_pixels, max_pixels)
        if (width, height) == image.size and target == source_format:
            check_complete(data)  # sent undecoded: a cut file must not reach the model
            return _data_url(data, target)
        needs_rgb = target == "jpeg" or image.mode not in ("RGB", "RGBA")
        out = image.convert("RGB") if needs_rgb else image
        if (width, height) != image.size:
            out = out.resize((width, height), Image.Resampling.BICUBIC)
        buffer = io.BytesIO()
        if target == "jpeg":
            out.save(buffer, format="JPEG", quality=jpeg_quality)
        else:
            out.save(buffer, format="PNG")
    return _data_url(buffer.getvalue(), target)


def png_passthrough_url(
    data: bytes, *, min_pixels: int = DEFAULT_MIN_PIXELS, max_pixels: int = DEFAULT_MAX_PIXELS
) -> str | None:
    """The data URL `encode_image` would return, when `data` is a PNG that needs no
    resize; None otherwise. Reads only the PNG header, so callers can skip a thread
    hop for images that need no work."""
    if data[:8] != b"\x89PNG\r\n\x1a\n" or len(data) < 24:
        return None
    size = (int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big"))
    if resized_image_size(size, min_pixels, max_pixels) != size:
        return None
    check_complete(data)
    return _data_url(data, "png")


_PNG_END = b"\x00\x00\x00\x00IEND\xaeB`\x82"
_JPEG_END = b"\xff\xd9"


def check_complete(data: bytes) -> None:
    """Raise `CorruptImageError` if PNG/JPEG bytes lack their end marker (a truncated
    transfer) without decoding them: what we pass through undecoded is checked here."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and not data.endswith(_PNG_END):
        raise CorruptImageError(
            f"screenshot PNG of {len(data)} bytes is truncated (no IEND chunk at the end)"
        )
    if data[:2] == b"\xff\xd8" and not data.rstrip(b"\x00").endswith(_JPEG_END):
        raise CorruptImageError(
            f"screenshot JPEG of {len(data)} bytes is truncated (no end-of-image marker)"
        )


def _data_url(data: bytes, fmt: str) -> str:
    return f"data:image/{fmt};base64,{base64.b64encode(data).decode('ascii')}"
