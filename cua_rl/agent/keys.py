"""Key names the computer_use `key` action may press, and the aliases models use.

The list is pyautogui's own `KEYBOARD_KEYS` (0.9.54), copied rather than imported:
importing pyautogui needs an X display, and the host that parses model output has
none. A name outside this list would be silently ignored by pyautogui on the
guest, so the parser rejects it instead, and the code generator re-checks it so
that nothing but a validated name is ever embedded in code.

Aliases map what models write (X keysyms, browser names, macOS names) to the
pyautogui name that works on the Linux desktops we drive: `cmd`, `command`,
`super` and `meta` become `win` (Super_L; pyautogui's `command` does nothing on
X11), `option` becomes `alt`, `return` becomes `enter`.
"""

from __future__ import annotations

import re

_SINGLE_CHARS = frozenset("!\"#$%&'()*+,-./0123456789:;<=>?@[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~")

_NAMED_KEYS = frozenset(
    """
    accept add alt altleft altright apps backspace browserback browserfavorites
    browserforward browserhome browserrefresh browsersearch browserstop capslock clear
    convert ctrl ctrlleft ctrlright decimal del delete divide down end enter esc escape
    execute f1 f10 f11 f12 f13 f14 f15 f16 f17 f18 f19 f2 f20 f21 f22 f23 f24 f3 f4 f5
    f6 f7 f8 f9 final fn hanguel hangul hanja help home insert junja kana kanji
    launchapp1 launchapp2 launchmail launchmediaselect left modechange multiply
    nexttrack nonconvert num0 num1 num2 num3 num4 num5 num6 num7 num8 num9 numlock
    pagedown pageup pause pgdn pgup playpause prevtrack print printscreen prntscrn prtsc
    prtscr return right scrolllock select separator shift shiftleft shiftright sleep
    space stop subtract tab up volumedown volumemute volumeup win winleft winright yen
    command option optionleft optionright
    """.split()
)

KEYBOARD_KEYS: frozenset[str] = _SINGLE_CHARS | _NAMED_KEYS | {"\t", "\n", "\r", " "}
"""pyautogui.KEYBOARD_KEYS: every name `press`/`hotkey` understands."""

_ALIASES = {
    "control": "ctrl",
    "ctrll": "ctrlleft",
    "controll": "ctrlleft",
    "ctrlr": "ctrlright",
    "controlr": "ctrlright",
    "cmd": "win",
    "command": "win",
    "super": "win",
    "superl": "winleft",
    "superr": "winright",
    "meta": "win",
    "windows": "win",
    "option": "alt",
    "optionleft": "altleft",
    "optionright": "altright",
    "altl": "altleft",
    "altr": "altright",
    "shiftl": "shiftleft",
    "shiftr": "shiftright",
    "return": "enter",
    "kpenter": "enter",
    "escape": "esc",
    "del": "delete",
    "ins": "insert",
    "bksp": "backspace",
    "arrowup": "up",
    "arrowdown": "down",
    "arrowleft": "left",
    "arrowright": "right",
    "uparrow": "up",
    "downarrow": "down",
    "leftarrow": "left",
    "rightarrow": "right",
    "pgup": "pageup",
    "pgdn": "pagedown",
    "prior": "pageup",
    "next": "pagedown",
    "spacebar": "space",
    "caps": "capslock",
    "menu": "apps",
    "plus": "+",
    "minus": "-",
}

_SINGLE_SPECIAL = {"\n": "enter", "\r": "enter", "\t": "tab", " ": "space"}
_SEPARATORS = re.compile(r"[\s_\-]")


def normalize_key(raw: str) -> str | None:
    """The canonical pyautogui name of `raw`, or None when pyautogui has no such key.

    Canonical names are lower case and unaliased so that generated code, history
    and tests see one spelling per key (`Return`, `ENTER` and `enter` are one key).
    """
    if len(raw) == 1:
        if raw in _SINGLE_SPECIAL:
            return _SINGLE_SPECIAL[raw]
        low = raw.lower()
        return low if low in _SINGLE_CHARS else None
    stripped = raw.strip()
    if len(stripped) == 1:
        return normalize_key(stripped)
    name = _SEPARATORS.sub("", stripped.lower())
    name = _ALIASES.get(name, name)
    if name in _NAMED_KEYS or name in _SINGLE_CHARS:
        return name
    return None


def split_combo(raw: str) -> list[str]:
    """Split a chord written as one string ("ctrl+shift+t", "ctrl++") into its keys.

    Models often put a whole chord in one array element; a lone "+" is the plus key.
    """
    if len(raw) <= 1 or "+" not in raw:
        return [raw]
    return re.split(r"\+(?!$)", raw)
