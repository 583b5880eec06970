"""Render parsed actions as the pyautogui code a desktop runs.

Safety invariant: the code consists only of calls in `ALLOWED_CALLS`, one per
line, whose arguments are literals produced by `repr()` of a re-validated int,
float or str. Model text never reaches the code any other way, so a response
cannot inject statements through `text` or `keys` even if a caller builds an
`Action` by hand (values are checked again here, raising ValueError).

The code does not import anything: it expects `pyautogui` and `time` in scope,
as our guest's /act worker and OSWorld's `execute_python_command` prefix provide.
`CODE_PRELUDE` is there for runners that start from an empty namespace.

Typing: `pyautogui.write` types printable ASCII (and tab); newlines become
`press('enter')` so that a multi-line `type` behaves the same on every platform.
Non-ASCII text never gets here: the parser rejects it because pyautogui would
silently drop those characters on X11.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from cua_rl.agent.keys import KEYBOARD_KEYS
from cua_rl.types import Action

ALLOWED_CALLS = frozenset(
    {
        "pyautogui.click",
        "pyautogui.doubleClick",
        "pyautogui.tripleClick",
        "pyautogui.rightClick",
        "pyautogui.middleClick",
        "pyautogui.moveTo",
        "pyautogui.dragTo",
        "pyautogui.mouseDown",
        "pyautogui.mouseUp",
        "pyautogui.scroll",
        "pyautogui.hscroll",
        "pyautogui.press",
        "pyautogui.hotkey",
        "pyautogui.typewrite",
        "pyautogui.write",
        "time.sleep",
    }
)
"""Every call generated code may contain (tests walk the AST against this set)."""

CODE_PRELUDE = "import pyautogui\nimport time\n"
DRAG_DURATION_S = 0.5
"""A drag needs intermediate motion events or many apps see a click, not a drag."""

_CLICK_CALLS = {
    "left_click": "pyautogui.click",
    "double_click": "pyautogui.doubleClick",
    "triple_click": "pyautogui.tripleClick",
    "right_click": "pyautogui.rightClick",
    "middle_click": "pyautogui.middleClick",
}
_TYPABLE = frozenset(chr(c) for c in range(0x20, 0x7F)) | {"\t"}


def to_pyautogui(actions: Sequence[Action]) -> str:
    """The code for `actions` in order; "" when none of them touches the desktop."""
    lines: list[str] = []
    for action in actions:
        lines.extend(_lines(action))
    return "\n".join(lines)


def terminal_status(actions: Sequence[Action]) -> Literal["success", "failure"] | None:
    """The status of a `terminate` among `actions`, None when the episode goes on."""
    for action in actions:
        if action.kind == "terminate":
            return action.status
    return None


def is_terminal(actions: Sequence[Action]) -> bool:
    """Whether the agent declared the task finished (successfully or not) this step."""
    return any(action.kind == "terminate" for action in actions)


def _call(name: str, *args: int | float | str, **kwargs: int | float | str) -> str:
    if name not in ALLOWED_CALLS:
        raise ValueError(f"not an allowed call: {name}")
    parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
    return f"{name}({', '.join(parts)})"


def _int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{what} must be int, got {value!r}")
    return value


def _xy(point: tuple[int, int] | None, what: str) -> tuple[int, int]:
    if point is None or len(point) != 2:
        raise ValueError(f"{what} must be (x, y), got {point!r}")
    x, y = _int(point[0], what), _int(point[1], what)
    if x < 0 or y < 0:
        raise ValueError(f"{what} must be non-negative, got {point!r}")
    return x, y


def _key(name: object) -> str:
    if not isinstance(name, str) or name not in KEYBOARD_KEYS:
        raise ValueError(f"not a pyautogui key: {name!r}")
    return name


def _type_lines(text: object) -> list[str]:
    if not isinstance(text, str) or not text:
        raise ValueError(f"type needs non-empty text, got {text!r}")
    lines: list[str] = []
    for i, chunk in enumerate(text.replace("\r\n", "\n").replace("\r", "\n").split("\n")):
        if i:
            lines.append(_call("pyautogui.press", "enter"))
        if any(c not in _TYPABLE for c in chunk):
            raise ValueError(f"text has characters pyautogui cannot type: {chunk!r}")
        if chunk:
            lines.append(_call("pyautogui.write", chunk))
    return lines


def _lines(action: Action) -> list[str]:
    kind = action.kind
    if kind in _CLICK_CALLS:
        if action.coordinate is None:
            return [_call(_CLICK_CALLS[kind])]
        return [_call(_CLICK_CALLS[kind], *_xy(action.coordinate, kind))]
    if kind == "mouse_move":
        return [_call("pyautogui.moveTo", *_xy(action.coordinate, kind))]
    if kind == "left_click_drag":
        lines = []
        if action.start is not None:
            lines.append(_call("pyautogui.moveTo", *_xy(action.start, "drag start")))
        x, y = _xy(action.coordinate, kind)
        lines.append(_call("pyautogui.dragTo", x, y, duration=DRAG_DURATION_S, button="left"))
        return lines
    if kind in ("scroll", "hscroll"):
        amount = _int(action.pixels, f"{kind} pixels")
        if action.coordinate is None:
            return [_call(f"pyautogui.{kind}", amount)]
        x, y = _xy(action.coordinate, kind)
        return [_call(f"pyautogui.{kind}", amount, x=x, y=y)]
    if kind == "key":
        keys = [_key(k) for k in action.keys]
        if not keys:
            raise ValueError("key action without keys")
        if len(keys) == 1:
            return [_call("pyautogui.press", keys[0])]
        return [_call("pyautogui.hotkey", *keys)]
    if kind == "type":
        return _type_lines(action.text)
    if kind == "wait":
        seconds = action.time
        if isinstance(seconds, bool) or not isinstance(seconds, int | float):
            raise ValueError(f"wait needs a number of seconds, got {seconds!r}")
        if not 0 <= seconds <= 3600:
            raise ValueError(f"wait seconds out of range: {seconds!r}")
        return [_call("time.sleep", float(seconds))] if seconds > 0 else []
    if kind == "terminate":
        return []
    raise ValueError(f"unknown action kind {kind!r}")
