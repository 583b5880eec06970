"""Keys GNOME binds that openbox's default configuration lacks.

OSWorld's tasks press Ctrl+Alt+T for a terminal, which GNOME opens and openbox
does not. Local desktops start openbox on a copy of the system's rc.xml with
these keys added (`local.sandbox`); images get them in their own
/etc/xdg/openbox/rc.xml at build time (`images.build`). Stdlib only.
"""

from __future__ import annotations

OPENBOX_KEYS = (
    '<keybind key="C-A-t"><action name="Execute"><command>gnome-terminal'
    "</command></action></keybind>"
)
"""Ctrl+Alt+T opens GNOME Terminal, as on OSWorld's image."""
KEYBOARD_END = "</keyboard>"
"""Where the keys go in openbox's rc.xml (inside its `<keyboard>` section)."""


def with_keys(rc_xml: str) -> str:
    """openbox's rc.xml with `OPENBOX_KEYS` added to its keyboard section (unchanged
    when they are there already); ValueError when it has no keyboard section."""
    if OPENBOX_KEYS in rc_xml:
        return rc_xml
    if KEYBOARD_END not in rc_xml:
        raise ValueError(f"openbox rc.xml has no {KEYBOARD_END} to add the keys before")
    return rc_xml.replace(KEYBOARD_END, OPENBOX_KEYS + KEYBOARD_END, 1)
