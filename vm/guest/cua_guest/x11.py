"""Small X11 queries (pointer, screen, windows by class) on one dedicated thread.

python-xlib connections are not thread-safe, so a single connection lives on a
single-thread executor; the event loop only awaits its results. The connection
is reopened if the display went away and came back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


class DisplayUnavailable(Exception):
    """The X display ($DISPLAY) cannot be reached."""


class X11:
    """Queries against $DISPLAY, each run on the X thread."""

    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="x11")
        self._conn: Any = None

    async def call(self, fn: Callable[[Any], T]) -> T:
        """Run fn(connection) on the X thread (for callers outside this module)."""
        return await self._call(fn)

    async def _call(self, fn: Callable[[Any], T]) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._with_conn, fn)

    def _with_conn(self, fn: Callable[[Any], T]) -> T:
        from Xlib import display, error  # late: keeps `--help` fast

        for attempt in range(2):
            try:
                if self._conn is None:
                    self._conn = display.Display()
                return fn(self._conn)
            except (error.DisplayError, error.ConnectionClosedError, OSError) as exc:
                self._conn = None
                if attempt == 1:
                    raise DisplayUnavailable(f"cannot reach the X display: {exc}") from None
        raise AssertionError("unreachable")

    async def ping(self) -> tuple[int, int]:
        """A server round trip; returns the screen size. Raises DisplayUnavailable."""

        def query(conn: Any) -> tuple[int, int]:
            conn.get_input_focus()  # forces a round trip, unlike the cached screen info
            screen = conn.screen()
            return screen.width_in_pixels, screen.height_in_pixels

        return await self._call(query)

    async def pointer(self) -> tuple[int, int]:
        """The pointer position in root coordinates."""

        def query(conn: Any) -> tuple[int, int]:
            reply = conn.screen().root.query_pointer()
            return reply.root_x, reply.root_y

        return await self._call(query)

    async def window_size(self, app_class: str) -> tuple[int, int] | None:
        """Size of the first managed window whose WM_CLASS contains app_class (any case)."""

        def query(conn: Any) -> tuple[int, int] | None:
            from Xlib import X, error

            root = conn.screen().root
            prop = root.get_full_property(conn.intern_atom("_NET_CLIENT_LIST"), X.AnyPropertyType)
            wanted = app_class.lower()
            for window_id in prop.value if prop is not None else []:
                try:
                    window = conn.create_resource_object("window", window_id)
                    wm_class = window.get_wm_class() or ()
                    if wanted in (name.lower() for name in wm_class):
                        geometry = window.get_geometry()
                        return geometry.width, geometry.height
                except error.XError:
                    continue
            return None

        return await self._call(query)

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
