"""Screenshots: mss capture (XShm) with the cursor drawn, encoded off the event loop.

Each capture thread keeps its own mss instance (they are not thread-safe and
opening one costs milliseconds). mss draws the real cursor image via XFixes into
the captured BGRA buffer; where XFixes is missing, an arrow is drawn at the pointer
position instead, so the agent always sees where the pointer is.

JPEG has two encoders (`JpegEncoder`):
- `turbo` (the default when simplejpeg imports): libjpeg-turbo's SIMD path reads
  the captured BGRA buffer as it is (a numpy view, no conversion copy) and
  subsamples chroma 4:2:0;
- `pillow`: the buffer is converted to an RGB image first, then Pillow encodes it
  (the path before issue 51, kept for comparison: `cua-rl bench guest` measures
  both in one run, and a request may ask for it with `?encoder=pillow`).
Both give the same picture within JPEG tolerance (Pillow subsamples 4:2:0 at
quality 90 too). Each capture reports how long the grab and the encode took (the
route sends them as a `Server-Timing` header).
"""

from __future__ import annotations

import asyncio
import importlib.util
import io
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal

import mss
from PIL import Image, ImageDraw

from cua_guest.fastpng import encode_rgb_png

HAS_TURBO = importlib.util.find_spec("simplejpeg") is not None
"""The fast JPEG path's binding is installed (imported on first use: numpy's import
would cost every guest start, and so every reset, ~0.1 s of CPU)."""

ImageFormat = Literal["png", "jpeg"]
JpegEncoder = Literal["turbo", "pillow"]
JPEG_ENCODERS: tuple[str, ...] = ("turbo", "pillow")

#: Arrow outline (tip at 0,0) used when the real cursor image is unavailable.
_ARROW = [(0, 0), (0, 17), (4, 13), (7, 20), (10, 19), (7, 12), (12, 12)]


def default_encoder() -> JpegEncoder:
    """`turbo` when simplejpeg is installed (the guest's dependency), else `pillow`."""
    return "turbo" if HAS_TURBO else "pillow"


@dataclass(frozen=True, slots=True)
class Capture:
    """One encoded screenshot and where its time went."""

    data: bytes
    encoder: str
    """`png`, or the JPEG encoder that ran."""
    grab_ms: float
    """XShm grab plus the cursor drawn into it."""
    encode_ms: float


class ScreenCapturer:
    """Grabs the whole X screen and encodes it as PNG or JPEG in worker threads."""

    def __init__(self, threads: int = 2) -> None:
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="capture")
        self._local = threading.local()

    async def screenshot(self, fmt: ImageFormat = "png", quality: int = 90) -> bytes:
        """The current screen with the cursor, encoded as `fmt`."""
        return (await self.capture(fmt, quality)).data

    async def capture(
        self, fmt: ImageFormat = "png", quality: int = 90, encoder: JpegEncoder | None = None
    ) -> Capture:
        """The current screen with the cursor, encoded as `fmt` (JPEG by `encoder`,
        default `default_encoder()`), with its timings."""
        if encoder == "turbo" and not HAS_TURBO:
            raise ValueError("encoder turbo: simplejpeg is not installed in the guest")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._executor, self._grab_encode, fmt, quality, encoder or default_encoder()
        )

    async def screen_size(self) -> tuple[int, int]:
        """(width, height) of the whole X screen."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._size)

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _mss(self) -> Any:
        sct = getattr(self._local, "sct", None)
        if sct is None:
            factory = getattr(mss, "MSS", None) or mss.mss
            sct = factory(with_cursor=True)
            self._local.sct = sct
        return sct

    def _size(self) -> tuple[int, int]:
        screen = self._mss().monitors[0]
        return int(screen["width"]), int(screen["height"])

    def _grab_encode(self, fmt: ImageFormat, quality: int, encoder: JpegEncoder) -> Capture:
        began = time.perf_counter()
        sct = self._mss()
        shot = sct.grab(sct.monitors[0])
        image = None
        if not sct.with_cursor:  # no XFixes: draw an arrow (on a converted copy)
            image = Image.frombuffer("RGB", shot.size, shot.raw, "raw", "BGRX", 0, 1)
            _draw_arrow(image, *self._pointer())
        grabbed = time.perf_counter()
        if fmt == "jpeg" and encoder == "turbo":
            data = _turbo_jpeg(shot, image, quality)
        else:
            if image is None:  # the path before issue 51, as it was (`bgra` is a copy)
                image = Image.frombuffer("RGB", shot.size, shot.bgra, "raw", "BGRX", 0, 1)
            if fmt == "jpeg":
                buffer = io.BytesIO()
                image.save(buffer, "JPEG", quality=quality)
                data = buffer.getvalue()
            else:
                data = encode_rgb_png(image.tobytes(), image.width, image.height)
        done = time.perf_counter()
        return Capture(
            data,
            encoder if fmt == "jpeg" else "png",
            (grabbed - began) * 1000,
            (done - grabbed) * 1000,
        )

    def _pointer(self) -> tuple[int, int]:
        """Pointer position through this thread's own Xlib connection (fallback only)."""
        from Xlib import display  # late: only needed without XFixes

        conn = getattr(self._local, "xlib", None)
        if conn is None:
            conn = self._local.xlib = display.Display()
        reply = conn.screen().root.query_pointer()
        return reply.root_x, reply.root_y


def _turbo_jpeg(shot: Any, drawn: Image.Image | None, quality: int) -> bytes:
    """libjpeg-turbo straight from the capture's BGRA bytes (a view, not a copy), or
    from the RGB copy the arrow fallback drew on."""
    import numpy
    import simplejpeg

    if drawn is not None:
        pixels = numpy.asarray(drawn)
        return simplejpeg.encode_jpeg(
            pixels, quality=quality, colorspace="RGB", colorsubsampling="420"
        )
    width, height = shot.size
    pixels = numpy.frombuffer(shot.raw, dtype=numpy.uint8).reshape(height, width, 4)
    return simplejpeg.encode_jpeg(
        pixels, quality=quality, colorspace="BGRA", colorsubsampling="420"
    )


def _draw_arrow(image: Image.Image, x: int, y: int) -> None:
    """Draw a white arrow with a black outline whose tip is at (x, y)."""
    draw = ImageDraw.Draw(image)
    draw.polygon([(x + dx, y + dy) for dx, dy in _ARROW], fill="white", outline="black")
