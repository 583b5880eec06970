"""The desktop wallpaper: set for /setup/change_wallpaper, found for /wallpaper.

OSWorld's server only runs `gsettings set ... picture-uri`, which changes
nothing without GNOME and a dconf-backed D-Bus session (gsettings then falls back
to its in-memory backend, says "changed", and forgets). So the guest always
paints the image on the X root window itself (what feh or xsetroot do, here
through python-xlib, already a dependency), which every bare window manager
shows, and also sets GNOME's key when gsettings keeps it. The path is kept in a
root-window property, so /wallpaper answers from the display's own state (it
survives a guest restart) and prefers GNOME's value when GNOME owns it.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from PIL import Image, UnidentifiedImageError

from cua_guest.procs import run_command
from cua_guest.x11 import X11

#: Root-window property holding "<path>\n<gnome|root>" of the last wallpaper set.
PROPERTY = "_CUA_GUEST_WALLPAPER"
_SCHEMA = ["org.gnome.desktop.background", "picture-uri"]
#: Bytes per PutImage request, under the core protocol's 256 KiB request limit.
_CHUNK_BYTES = 200 * 1024


class WallpaperError(Exception):
    """The image cannot be used as a wallpaper (the message says why)."""


async def change_wallpaper(x11: X11, path: Path) -> str:
    """Show `path` as the wallpaper; returns where ("root window", "+ GNOME").

    Raises WallpaperError for a file that is not an image, before changing anything.
    """
    width, height = await x11.ping()

    def paint(conn: Any) -> None:  # on the X thread: decoding and scaling stay off the loop
        _paint_root(conn, _load_scaled(path, width, height), width, height)

    await x11.call(paint)
    gnome = await _set_gnome(path)
    record = f"{path}\n{'gnome' if gnome else 'root'}"
    await x11.call(lambda conn: _write_property(conn, record))
    return "root window and GNOME" if gnome else "root window"


async def current_wallpaper(x11: X11) -> Path | None:
    """The wallpaper file shown now, or None when none is known or it is gone."""
    recorded = await x11.call(_read_property)
    path_text, _, owner = (recorded or "").partition("\n")
    if recorded is None or owner == "gnome":
        gnome = await _get_gnome()
        if gnome is not None and gnome.is_file():
            return gnome
    path = Path(path_text) if path_text else None
    return path if path is not None and path.is_file() else None


def _load_scaled(path: Path, width: int, height: int) -> bytes:
    """The image scaled to the screen as BGRX bytes (the root window's 32 bpp layout)."""
    try:
        with Image.open(path) as image:
            rgb = image.convert("RGB").resize((width, height))
    except (UnidentifiedImageError, Image.DecompressionBombError, OSError, ValueError) as exc:
        raise WallpaperError(f"path: {path} is not a readable image ({exc})") from None
    return rgb.tobytes("raw", "BGRX")


def _paint_root(conn: Any, pixels: bytes, width: int, height: int) -> None:
    from Xlib import X

    screen = conn.screen()
    root = screen.root
    pixmap = root.create_pixmap(width, height, screen.root_depth)
    gc = pixmap.create_gc()
    stride = width * 4
    rows = max(1, _CHUNK_BYTES // stride)
    for top in range(0, height, rows):
        count = min(rows, height - top)
        chunk = pixels[top * stride : (top + count) * stride]
        pixmap.put_image(gc, 0, top, width, count, X.ZPixmap, screen.root_depth, 0, chunk)
    root.change_attributes(background_pixmap=pixmap)
    root.clear_area(0, 0, 0, 0)
    # The window keeps its own reference to its background; ours can go.
    gc.free()
    pixmap.free()
    conn.sync()


def _write_property(conn: Any, value: str) -> None:
    from Xlib import X

    root = conn.screen().root
    atom = conn.intern_atom(PROPERTY)
    utf8 = conn.intern_atom("UTF8_STRING")
    root.change_property(atom, utf8, 8, value.encode("utf-8", "surrogateescape"), X.PropModeReplace)
    conn.sync()


def _read_property(conn: Any) -> str | None:
    from Xlib import X

    prop = conn.screen().root.get_full_property(conn.intern_atom(PROPERTY), X.AnyPropertyType)
    if prop is None:
        return None
    value = prop.value
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)


async def _set_gnome(path: Path) -> bool:
    """Set GNOME's picture-uri; True only when gsettings really kept it (dconf)."""
    if shutil.which("gsettings") is None:
        return False
    uri = _file_uri(path)
    await run_command(["gsettings", "set", *_SCHEMA, uri], timeout=10)
    return await _get_gnome_uri() == uri


def _file_uri(path: Path) -> str:
    return path.absolute().as_uri()


async def _get_gnome() -> Path | None:
    uri = await _get_gnome_uri()
    if not uri or not uri.startswith("file://"):
        return None
    from urllib.parse import unquote, urlparse

    return Path(unquote(urlparse(uri).path))


async def _get_gnome_uri() -> str | None:
    if shutil.which("gsettings") is None:
        return None
    result = await run_command(["gsettings", "get", *_SCHEMA], timeout=10)
    if result.returncode != 0:
        return None
    return result.stdout.strip().strip("'") or None
