"""Turn a policy response into validated `Action`s, or a `ParseError` (never an exception).

Expected format: optional thinking (`<think>...</think>` or free text), then
`Action: <one sentence>`, then exactly one
`<tool_call>{"name": "computer_use", "arguments": {...}}</tool_call>` block.

Invariant: every value in a returned `Action` has been type- and range-checked
(coordinates inside the screen, keys in pyautogui's key list, text printable
ASCII of bounded length), so `to_pyautogui` can embed it without further doubt.
A response is all or nothing: a bad call rejects the whole step (executing half
a plan is worse than a recorded no-op, docs/architecture.md, failure rules).

Several tool calls in one response are a parse error (`several_tool_calls`), not
"run the first and drop the rest": the response format asks for exactly one call
(the method's format, which the reward model and the critic also read), and
running only the first would execute part of a plan the model wrote as a whole,
record a step that differs from the text being trained on, and teach nothing
against the format violation. As a recorded no-op the step is still judged by
the reward model, which is told that nothing was executed.

Tolerated model quirks (each seen in Qwen/OSWorld outputs):
- tool calls are searched only after the last `</think>`; a `<think>` without
  `</think>` means the response was truncated and yields `no_tool_call`;
- the JSON may sit inside a ```json code fence within the tags;
- the last `<tool_call>` may lack `</tool_call>` (stop at end of text);
- `arguments` may be a JSON-encoded string of an object;
- `keys` may be one string instead of an array, and a chord may be one element
  ("ctrl+c"); key names are case-insensitive and aliased (see `keys.py`);
- click actions without `coordinate` click at the current cursor position;
- `wait` without `time` waits `DEFAULT_WAIT_S`;
- arguments the action does not use (e.g. `coordinate` on `type`) are ignored.
Not tolerated: tool calls without tags, trailing commas or other invalid JSON,
unknown argument names, NaN/Infinity, numbers given as strings, out-of-range
coordinates, text with characters pyautogui cannot type (non-ASCII is rejected,
not dropped, so that the step is never silently different from what the model
wrote).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Literal

from cua_rl.agent.keys import normalize_key, split_combo
from cua_rl.agent.tool_schema import ACTIONS, TOOL_NAME, CoordinateMode, coordinate_space
from cua_rl.types import Action, ParseError

MAX_KEYS = 6
MAX_TEXT_CHARS = 2000
MAX_SCROLL = 200
"""pyautogui scrolls in wheel clicks; more than this is a runaway value, not intent."""
MAX_WAIT_S = 60.0
DEFAULT_WAIT_S = 1.0

_OPEN, _CLOSE = "<tool_call>", "</tool_call>"
_ARGUMENT_NAMES = frozenset(
    {"action", "keys", "text", "coordinate", "start_coordinate", "pixels", "time", "status"}
)
_CLICKS = frozenset({"left_click", "right_click", "middle_click", "double_click", "triple_click"})
_TYPABLE = frozenset(chr(c) for c in range(0x20, 0x7F)) | {"\n", "\r", "\t"}
_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n?(.*?)\n?\s*```$", re.DOTALL)
_ACTION_LINE = re.compile(r"^\s*\**Action\**\s*:\s*\**\s*(.+)$", re.MULTILINE)


class _Invalid(Exception):
    """Internal signal carrying a ParseError out of nested validation."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.error = ParseError(code, message)


def parse_response(
    text: str,
    screen: tuple[int, int],
    coords: CoordinateMode = "relative",
    image_size: tuple[int, int] | None = None,
) -> tuple[list[Action], ParseError | None]:
    """Parse a policy response into its one screen-pixel action (a list of one).

    `screen` and `image_size` are (width, height). Relative coordinates are on the
    0..1000 grid; absolute ones are pixels of the resized image the model saw
    (`image_size`) or, when it is None, screen pixels. Returns ([], error) on any
    problem with the model's output; a bad `screen`/`coords` is the caller's bug and
    raises ValueError.
    """
    _check_size("screen", screen)
    if image_size is not None:
        _check_size("image_size", image_size)
    space = coordinate_space(screen, coords, image_size)
    if not isinstance(text, str):
        return [], ParseError("bad_response", f"response must be str, got {type(text).__name__}")
    try:
        block = _tool_call_block(_after_thinking(text))
        action = _to_action(_decode_call(block, 0), 0, screen, space)
    except _Invalid as invalid:
        return [], invalid.error
    return [action], None


def action_sentence(text: str) -> str:
    """The "Action: ..." sentence of a response (outside thinking), or "" if absent.

    This is the one line per step that later prompts carry as text history.
    """
    if not isinstance(text, str):
        return ""
    body = text.rsplit("</think>", 1)[-1]
    body = body.split(_OPEN, 1)[0]
    matches = _ACTION_LINE.findall(body)
    return matches[-1].strip()[:500] if matches else ""


def _check_size(name: str, size: tuple[int, int]) -> None:
    ok = (
        isinstance(size, tuple | list)
        and len(size) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in size)
    )
    if not ok:
        raise ValueError(f"{name} must be (width, height) positive ints, got {size!r}")


def _after_thinking(text: str) -> str:
    if "</think>" in text:
        return text.rsplit("</think>", 1)[1]
    if "<think>" in text:
        raise _Invalid("no_tool_call", "<think> is never closed (response truncated?)")
    return text


def _tool_call_block(body: str) -> str:
    """The content of the one `<tool_call>` block (the last may lack its close tag)."""
    count = body.count(_OPEN)
    if count == 0:
        raise _Invalid("no_tool_call", "no <tool_call> block after the thinking")
    if count > 1:
        raise _Invalid(
            "several_tool_calls", f"{count} <tool_call> blocks; the format allows exactly one"
        )
    start = body.find(_OPEN) + len(_OPEN)
    end = body.find(_CLOSE, start)
    return body[start:] if end < 0 else body[start:end]


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _load_json(raw: str, what: str) -> Any:
    raw = raw.strip()
    fenced = _FENCE.match(raw)
    if fenced:
        raw = fenced.group(1).strip()
    try:
        return json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise _Invalid("bad_json", f"{what} is not valid JSON: {exc}"[:300]) from None


def _decode_call(block: str, index: int) -> dict[str, Any]:
    call = _load_json(block, f"tool call {index}")
    if not isinstance(call, dict):
        raise _Invalid("bad_json", f"tool call {index} must be a JSON object")
    if call.get("name") != TOOL_NAME:
        raise _Invalid("unknown_tool", f"tool call {index} names {call.get('name')!r}"[:200])
    args = call.get("arguments")
    if isinstance(args, str):
        args = _load_json(args, f"tool call {index} arguments")
    if not isinstance(args, dict):
        raise _Invalid("bad_arguments", f"tool call {index}: arguments must be an object")
    unknown = sorted(str(k) for k in args if k not in _ARGUMENT_NAMES)
    if unknown:
        raise _Invalid("bad_argument", f"tool call {index}: unknown arguments {unknown}"[:200])
    return args


def _to_action(
    args: dict[str, Any], index: int, screen: tuple[int, int], space: tuple[int, int]
) -> Action:
    kind = args.get("action")
    if kind not in ACTIONS:
        raise _Invalid("unknown_action", f"tool call {index}: unknown action {kind!r}"[:200])
    where = f"tool call {index} ({kind})"

    def point(name: str, required: bool) -> tuple[int, int] | None:
        if name not in args:
            if required:
                raise _Invalid("missing_argument", f"{where}: `{name}` is required")
            return None
        return _point(args[name], f"{where}: `{name}`", screen, space)

    if kind == "key":
        return Action(kind, keys=_keys(args.get("keys"), where))
    if kind == "type":
        return Action(kind, text=_text(args.get("text"), where))
    if kind == "mouse_move":
        return Action(kind, coordinate=point("coordinate", True))
    if kind in _CLICKS:
        return Action(kind, coordinate=point("coordinate", False))
    if kind == "left_click_drag":
        return Action(
            kind, coordinate=point("coordinate", True), start=point("start_coordinate", False)
        )
    if kind in ("scroll", "hscroll"):
        amount = _number(args.get("pixels"), f"{where}: `pixels`")
        if abs(amount) > MAX_SCROLL:
            raise _Invalid("bad_argument", f"{where}: |pixels| must be <= {MAX_SCROLL}")
        return Action(kind, pixels=round(amount), coordinate=point("coordinate", False))
    if kind == "wait":
        seconds = _number(args["time"], f"{where}: `time`") if "time" in args else DEFAULT_WAIT_S
        if not 0 <= seconds <= MAX_WAIT_S:
            raise _Invalid("bad_argument", f"{where}: `time` must be in [0, {MAX_WAIT_S}]")
        return Action(kind, time=float(seconds))
    status = args.get("status")
    if status not in ("success", "failure"):
        raise _Invalid("bad_argument", f"{where}: `status` must be 'success' or 'failure'")
    terminal: Literal["success", "failure"] = status
    return Action("terminate", status=terminal)


def _number(value: Any, what: str) -> float:
    if value is None:
        raise _Invalid("missing_argument", f"{what} is required")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _Invalid("bad_argument", f"{what} must be a number, got {type(value).__name__}")
    if not math.isfinite(value):
        raise _Invalid("bad_argument", f"{what} must be finite")
    return value


def _point(
    value: Any, what: str, screen: tuple[int, int], space: tuple[int, int]
) -> tuple[int, int]:
    if not isinstance(value, list) or len(value) != 2:
        raise _Invalid("bad_argument", f"{what} must be [x, y]")
    pixels = []
    for v, extent, dim in zip(value, space, screen, strict=True):
        v = _number(v, what)
        if not 0 <= v <= extent:
            raise _Invalid("bad_argument", f"{what} out of range: {v} not in [0, {extent}]")
        # The far edge (v == extent) maps one past the last pixel; clamp it onto the screen.
        pixels.append(min(max(round(v / extent * dim), 0), dim - 1))
    return (pixels[0], pixels[1])


def _keys(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        raise _Invalid("missing_argument", f"{where}: `keys` is required")
    raw = [value] if isinstance(value, str) else value
    if not isinstance(raw, list) or not raw or not all(isinstance(k, str) for k in raw):
        raise _Invalid("bad_argument", f"{where}: `keys` must be a non-empty array of strings")
    keys: list[str] = []
    for item in raw:
        for part in split_combo(item):
            name = normalize_key(part)
            if name is None:
                raise _Invalid("bad_key", f"{where}: unknown key {part!r}"[:200])
            keys.append(name)
    if len(keys) > MAX_KEYS:
        raise _Invalid("bad_argument", f"{where}: at most {MAX_KEYS} keys in one chord")
    return tuple(keys)


def _text(value: Any, where: str) -> str:
    if value is None:
        raise _Invalid("missing_argument", f"{where}: `text` is required")
    if not isinstance(value, str) or not value:
        raise _Invalid("bad_argument", f"{where}: `text` must be a non-empty string")
    if len(value) > MAX_TEXT_CHARS:
        raise _Invalid("bad_argument", f"{where}: `text` longer than {MAX_TEXT_CHARS} chars")
    bad = sorted({c for c in value if c not in _TYPABLE})
    if bad:
        shown = "".join(bad[:10])
        raise _Invalid("unsupported_text", f"{where}: pyautogui cannot type {shown!r}")
    return value.replace("\r\n", "\n").replace("\r", "\n")
