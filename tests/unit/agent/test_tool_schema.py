"""The computer_use tool schema and the Qwen <tools> system prompt."""

from __future__ import annotations

import json
import re

from cua_rl.agent.keys import normalize_key, split_combo
from cua_rl.agent.tool_schema import ACTIONS, computer_use_tool, system_prompt


def test_tool_has_qwen_shape() -> None:
    tool = computer_use_tool((1000, 1000))
    function = tool["function"]
    assert tool["type"] == "function" and function["name"] == "computer_use"
    properties = function["parameters"]["properties"]
    assert set(properties) == {"action", "keys", "text", "coordinate", "pixels", "time", "status"}
    assert properties["action"]["enum"] == list(ACTIONS)
    assert set(ACTIONS) >= {"key", "type", "triple_click", "hscroll", "wait", "terminate"}
    assert properties["status"]["enum"] == ["success", "failure"]
    assert function["parameters"]["required"] == ["action"]
    assert "resolution is 1000x1000" in function["description"]


def test_system_prompt_embeds_tool_json_in_tools_block() -> None:
    prompt = system_prompt((1920, 1080), "absolute")
    block = re.search(r"<tools>\n(.*)\n</tools>", prompt, re.DOTALL)
    assert block is not None
    tool = json.loads(block.group(1))
    assert "resolution is 1920x1080" in tool["function"]["description"]
    assert '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}' in prompt
    assert "Action:" in prompt


def test_key_aliases() -> None:
    cases = {
        "Return": "enter",
        "ENTER": "enter",
        "Control": "ctrl",
        "cmd": "win",
        "Super": "win",
        "meta": "win",
        "option": "alt",
        "Escape": "esc",
        "page_down": "pagedown",
        "PgUp": "pageup",
        "ArrowLeft": "left",
        "BackSpace": "backspace",
        "Delete": "delete",
        "F12": "f12",
        "A": "a",
        " ": "space",
        "\n": "enter",
        "+": "+",
    }
    for raw, name in cases.items():
        assert normalize_key(raw) == name, raw
    for bad in ("", "hyper", "enter'", "é", "ctrl+c", "f25"):
        assert normalize_key(bad) is None, bad
    assert split_combo("ctrl+shift+t") == ["ctrl", "shift", "t"]
    assert split_combo("ctrl++") == ["ctrl", "+"]
    assert split_combo("+") == ["+"]
