"""Observation and action spaces of the desktop environments.

Observation: a `Dict` of the screenshot (`Box` of uint8, height x width x 3, the
screen's size), the task's instruction and, when asked, the accessibility tree
(text). Action: `Text`, the OSWorld-compatible string form (pyautogui code,
`WAIT`/`DONE`/`FAIL`, or a model response with one `<tool_call>`); `step` also
takes a `computer_use` tool call as a dict, which no Gymnasium space describes.
"""

from __future__ import annotations

import string

from gymnasium import spaces

from cua_rl.env.config import EnvConfig

MAX_ACTION_CHARS = 20_000
"""Longest action string (a pyautogui program or a model response)."""


class AnyText(spaces.Text):
    """Any `str` of bounded length: an instruction or an accessibility tree may hold
    any Unicode character, which Gymnasium's `Text` (a fixed character set) would
    reject. Samples are printable ASCII."""

    def __init__(self, max_length: int, *, min_length: int = 0, seed: int | None = None) -> None:
        super().__init__(max_length, min_length=min_length, charset=string.printable, seed=seed)

    def contains(self, x: object) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"AnyText({self.min_length}, {self.max_length})"


def observation_space(cfg: EnvConfig) -> spaces.Dict:
    width, height = cfg.screen_hint()
    parts: dict[str, spaces.Space] = {
        "screenshot": spaces.Box(0, 255, shape=(height, width, 3), dtype="uint8"),
        "instruction": AnyText(cfg.max_text_chars),
    }
    if cfg.accessibility_tree:
        parts["accessibility_tree"] = AnyText(cfg.max_text_chars)
    return spaces.Dict(parts)


def action_space() -> spaces.Text:
    return spaces.Text(MAX_ACTION_CHARS, min_length=1, charset=string.printable)
