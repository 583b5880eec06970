"""Screenshots: mss capture (XShm) with the cursor drawn, encoded off the event loop.

Each capture thread keeps its own mss instance (they are not thread-safe and
opening one costs milliseconds). mss draws the real cursor image via XFixes;
where XFixes is missing, an arrow is drawn at the pointer position instead, so
the agent always sees where the pointer is.
"""

from __future__ import annotations

import asyncio
import io
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

import mss
from PIL import Image, ImageDraw

from cua_guest.fastpng import encode_rgb_png

ImageFormat = Literal["png", "jpeg"]

#: Arrow outline (tip at 0,0) used when the real cursor image is unavailable.
_ARROW = [(0, 0), (0, 17), (4, 13), (7, 20), (10, 19), (7, 12), (12, 12)]


class ScreenCapturer:
    """Grabs the whole X screen and encodes it as PNG or JPEG in worker threads."""

    def __init__(self, threads: int = 2) -> None:
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="capture")
        self._local = threading.local()

    async def screenshot(self, fmt: ImageFormat = "png", quality: int = 90) -> bytes:
        """The current screen with the cursor, encoded as `fmt`."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._grab_encode, fmt, quality)

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

    def _grab_encode(self, fmt: ImageFormat, quality: int) -> bytes:
        sct = self._mss()
        shot = sct.grab(sct.monitors[0])
        image = Image.frombuffer("RGB", shot.size, shot.bgra, "raw", "BGRX", 0, 1)
        if not sct.with_cursor:
            _draw_arrow(image, *self._pointer())
        if fmt == "jpeg":
            buffer = io.BytesIO()
            image.save(buffer, "JPEG", quality=quality)
            return buffer.getvalue()
        return encode_rgb_png(image.tobytes(), image.width, image.height)

    def _pointer(self) -> tuple[int, int]:
        """Pointer position through this thread's own Xlib connection (fallback only)."""
        from Xlib import display  # late: only needed without XFixes

        conn = getattr(self._local, "xlib", None)
        if conn is None:
            conn = self._local.xlib = display.Display()
        reply = conn.screen().root.query_pointer()
        return reply.root_x, reply.root_y


def _draw_arrow(image: Image.Image, x: int, y: int) -> None:
    """Draw a white arrow with a black outline whose tip is at (x, y)."""
    draw = ImageDraw.Draw(image)
    draw.polygon([(x + dx, y + dy) for dx, dy in _ARROW], fill="white", outline="black")
