"""What `step(action)` accepts, turned into what a desktop runs.

Accepted actions (docs/gymnasium.md):
- a `computer_use` tool call as a dict, `{"name": "computer_use", "arguments": {...}}`
  or just its arguments `{"action": "left_click", "coordinate": [x, y]}`: validated
  by the project's response parser and rendered by its injection-safe pyautogui
  code generator (cua_rl/agent), exactly as a policy's call is in training;
- a model's raw response text holding one `<tool_call>` block (the same parser);
- for OSWorld compatibility, a pyautogui code string, run as it is (as OSWorld's
  `pyautogui` action space does; the desktop is a sandbox), or `WAIT`, `DONE`, `FAIL`.

Invariant: this module never raises on an action. One that does not parse (a bad
call, code that does not compile, a value of another type, which is what
Gymnasium's checker sends when it samples the action space) becomes a no-op with
its reason, so an episode is never broken by what an agent wrote.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from cua_rl.agent import parse_response, to_pyautogui
from cua_rl.agent.tool_schema import TOOL_NAME, CoordinateMode
from cua_rl.types import Action, ParseError

SPECIAL = ("WAIT", "DONE", "FAIL")
"""OSWorld's special actions: pause, declare success, declare failure."""


@dataclass(frozen=True, slots=True)
class EnvAction:
    """One step's action, resolved."""

    kind: str
    """`tool_call`, `response`, `pyautogui`, `WAIT`, `DONE`, `FAIL` or `invalid`."""
    text: str
    """The action as text: what the reward model reads as the agent's response."""
    actions: tuple[Action, ...] = ()
    """Parsed `computer_use` actions (a terminate for DONE/FAIL)."""
    code: str = ""
    """pyautogui code to run on the desktop ("" runs nothing)."""
    error: ParseError | None = None
    """Why the action was a no-op, when it did not parse."""

    @property
    def last(self) -> Action | None:
        return self.actions[-1] if self.actions else None

    @property
    def terminal(self) -> bool:
        return any(a.kind == "terminate" for a in self.actions)


def tool_call_text(call: dict[str, Any]) -> str:
    """A tool call dict as the response text the parser (and the reward model) reads."""
    if "name" not in call and "action" in call:
        call = {"name": TOOL_NAME, "arguments": call}
    return f"<tool_call>\n{json.dumps(call, ensure_ascii=False)}\n</tool_call>"


def resolve(action: object, screen: tuple[int, int], coords: CoordinateMode) -> EnvAction:
    """`action` as an EnvAction; a bad one is a no-op with `error` set (never raises)."""
    if isinstance(action, dict):
        try:
            text = tool_call_text(action)
        except (TypeError, ValueError) as exc:
            return _invalid(repr(action)[:500], "bad_json", f"tool call is not JSON: {exc}")
        return _parsed("tool_call", text, screen, coords)
    if not isinstance(action, str):
        return _invalid(
            repr(action)[:500],
            "bad_action",
            f"expected a computer_use call (dict) or a string, got {type(action).__name__}",
        )
    text = action.strip()
    if text == "WAIT":
        return EnvAction("WAIT", text)
    if text in ("DONE", "FAIL"):
        status = "success" if text == "DONE" else "failure"
        return EnvAction(text, text, (Action("terminate", status=status),))
    if "<tool_call>" in text:
        return _parsed("response", action, screen, coords)
    if not text:
        return _invalid(action, "empty_action", "empty action string")
    try:
        compile(text, "<action>", "exec")
    except (SyntaxError, ValueError) as exc:
        return _invalid(action, "bad_code", f"pyautogui code does not compile: {exc}"[:300])
    return EnvAction("pyautogui", action, code=text)


def _parsed(kind: str, text: str, screen: tuple[int, int], coords: CoordinateMode) -> EnvAction:
    actions, error = parse_response(text, screen, coords)
    if error is not None:
        return EnvAction("invalid", text, error=error)
    return EnvAction(kind, text, tuple(actions), code=to_pyautogui(actions))


def _invalid(text: str, code: str, message: str) -> EnvAction:
    return EnvAction("invalid", text, error=ParseError(code, message))
