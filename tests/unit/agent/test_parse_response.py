"""parse_response: every action kind, exactly one call, thinking, coordinate scaling,
tolerated quirks and rejected inputs."""

from __future__ import annotations

import json

import pytest

from cua_rl.agent.parse import MAX_TEXT_CHARS, action_sentence, parse_response
from cua_rl.types import Action

SCREEN = (1920, 1080)


def call(**arguments: object) -> str:
    body = json.dumps({"name": "computer_use", "arguments": arguments})
    return f"<tool_call>\n{body}\n</tool_call>"


def parse_one(arguments: dict, **kwargs: object) -> Action:
    actions, error = parse_response(f"Action: do it.\n{call(**arguments)}", SCREEN, **kwargs)
    assert error is None, error
    assert len(actions) == 1
    return actions[0]


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"action": "key", "keys": ["ctrl", "c"]}, Action("key", keys=("ctrl", "c"))),
        ({"action": "key", "keys": ["Return"]}, Action("key", keys=("enter",))),
        ({"action": "type", "text": "hello"}, Action("type", text="hello")),
        (
            {"action": "mouse_move", "coordinate": [500, 500]},
            Action("mouse_move", coordinate=(960, 540)),
        ),
        (
            {"action": "left_click", "coordinate": [250, 750]},
            Action("left_click", coordinate=(480, 810)),
        ),
        ({"action": "right_click", "coordinate": [0, 0]}, Action("right_click", coordinate=(0, 0))),
        (
            {"action": "middle_click", "coordinate": [100, 100]},
            Action("middle_click", coordinate=(192, 108)),
        ),
        (
            {"action": "double_click", "coordinate": [100, 100]},
            Action("double_click", coordinate=(192, 108)),
        ),
        (
            {"action": "triple_click", "coordinate": [100, 100]},
            Action("triple_click", coordinate=(192, 108)),
        ),
        ({"action": "left_click"}, Action("left_click")),
        (
            {"action": "left_click_drag", "coordinate": [500, 500]},
            Action("left_click_drag", coordinate=(960, 540)),
        ),
        (
            {"action": "left_click_drag", "start_coordinate": [0, 0], "coordinate": [500, 500]},
            Action("left_click_drag", coordinate=(960, 540), start=(0, 0)),
        ),
        ({"action": "scroll", "pixels": -5}, Action("scroll", pixels=-5)),
        (
            {"action": "scroll", "pixels": 3, "coordinate": [500, 500]},
            Action("scroll", pixels=3, coordinate=(960, 540)),
        ),
        ({"action": "hscroll", "pixels": 2.0}, Action("hscroll", pixels=2)),
        ({"action": "wait", "time": 2}, Action("wait", time=2.0)),
        ({"action": "wait"}, Action("wait", time=1.0)),
        ({"action": "terminate", "status": "success"}, Action("terminate", status="success")),
        ({"action": "terminate", "status": "failure"}, Action("terminate", status="failure")),
    ],
)
def test_every_action_kind_parses(arguments: dict, expected: Action) -> None:
    assert parse_one(arguments) == expected


def test_several_tool_calls_are_a_parse_error_not_a_partial_step() -> None:
    """The format allows exactly one call: the first is not run and the rest dropped."""
    text = (
        "I will focus the field, type and submit.\nAction: Search for cats.\n"
        + call(action="left_click", coordinate=[500, 100])
        + "\n"
        + call(action="type", text="cats")
        + call(action="key", keys=["enter"])
    )
    actions, error = parse_response(text, SCREEN)
    assert actions == []
    assert error is not None and error.code == "several_tool_calls"
    assert "3 <tool_call> blocks" in error.message


def test_one_tool_call_gives_one_action() -> None:
    text = "Action: Search for cats.\n" + call(action="type", text="cats") + "\n"
    actions, error = parse_response(text, SCREEN)
    assert error is None and actions == [Action("type", text="cats")]


def test_tool_calls_inside_thinking_are_ignored() -> None:
    draft = call(action="terminate", status="failure")
    text = f"<think>maybe {draft}? no.</think>\nAction: Click.\n" + call(action="left_click")
    actions, error = parse_response(text, SCREEN)
    assert error is None and [a.kind for a in actions] == ["left_click"]


def test_thinking_prefix_without_open_tag() -> None:
    # Qwen3-VL-Thinking's template opens <think> in the prompt; the output only closes it.
    text = "the button is top left</think>\n\nAction: Click.\n" + call(action="left_click")
    assert parse_response(text, SCREEN)[1] is None


def test_unclosed_thinking_is_truncation() -> None:
    text = "<think>still thinking " + call(action="left_click")
    actions, error = parse_response(text, SCREEN)
    assert actions == [] and error is not None and error.code == "no_tool_call"


def test_relative_scaling_and_clamping() -> None:
    assert parse_one({"action": "left_click", "coordinate": [1000, 1000]}).coordinate == (
        1919,
        1079,
    )
    assert parse_one({"action": "left_click", "coordinate": [999.6, 0.4]}).coordinate == (1919, 0)


def test_absolute_coordinates_scale_from_image_size() -> None:
    action = parse_one(
        {"action": "left_click", "coordinate": [752, 416]},
        coords="absolute",
        image_size=(1504, 832),
    )
    assert action.coordinate == (960, 540)
    edge = parse_one(
        {"action": "left_click", "coordinate": [1504, 832]},
        coords="absolute",
        image_size=(1504, 832),
    )
    assert edge.coordinate == (1919, 1079)


def test_absolute_coordinates_without_image_size_are_screen_pixels() -> None:
    action = parse_one({"action": "left_click", "coordinate": [1234, 567]}, coords="absolute")
    assert action.coordinate == (1234, 567)


def test_tolerated_quirks() -> None:
    wait = '{"name": "computer_use", "arguments": {"action": "wait"}}'
    fenced = f"<tool_call>\n```json\n{wait}\n```\n</tool_call>"
    assert parse_response(fenced, SCREEN)[1] is None
    unclosed = (
        'Action: wait.\n<tool_call>\n{"name": "computer_use", "arguments": {"action": "wait"}}\n'
    )
    assert parse_response(unclosed, SCREEN)[1] is None
    string_args = json.dumps(
        {"name": "computer_use", "arguments": json.dumps({"action": "key", "keys": "ctrl+shift+t"})}
    )
    actions, error = parse_response(f"<tool_call>{string_args}</tool_call>", SCREEN)
    assert error is None and actions[0].keys == ("ctrl", "shift", "t")
    assert parse_one({"action": "key", "keys": ["ctrl++"]}).keys == ("ctrl", "+")
    assert parse_one({"action": "type", "text": "a", "coordinate": [1, 1]}) == Action(
        "type", text="a"
    )
    assert parse_one({"action": "type", "text": "a\r\nb"}).text == "a\nb"


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("", "no_tool_call"),
        ("Action: click the thing.", "no_tool_call"),
        ('{"name": "computer_use", "arguments": {"action": "wait"}}', "no_tool_call"),
        ("<tool_call>{'name': 'computer_use'}</tool_call>", "bad_json"),
        (
            '<tool_call>{"name": "computer_use", "arguments": {"action": "wait",}}</tool_call>',
            "bad_json",
        ),
        ("<tool_call>[1, 2]</tool_call>", "bad_json"),
        ('<tool_call>{"name": "browser", "arguments": {}}</tool_call>', "unknown_tool"),
        ('<tool_call>{"name": "computer_use", "arguments": [1]}</tool_call>', "bad_arguments"),
        ('<tool_call>{"name": "computer_use"}</tool_call>', "bad_arguments"),
        (call(action="answer", text="42"), "unknown_action"),
        (call(), "unknown_action"),
        (call(action="left_click", button="left"), "bad_argument"),
        (call(action="key"), "missing_argument"),
        (call(action="key", keys=[]), "bad_argument"),
        (call(action="key", keys=["enter'); os.system('x"]), "bad_key"),
        (call(action="key", keys=["hyper"]), "bad_key"),
        (call(action="key", keys=["a", "b", "c", "d", "e", "f", "g"]), "bad_argument"),
        (call(action="type"), "missing_argument"),
        (call(action="type", text=""), "bad_argument"),
        (call(action="type", text=5), "bad_argument"),
        (call(action="type", text="x" * (MAX_TEXT_CHARS + 1)), "bad_argument"),
        (call(action="type", text="héllo"), "unsupported_text"),
        (call(action="type", text="a\x00b"), "unsupported_text"),
        (call(action="mouse_move"), "missing_argument"),
        (call(action="left_click_drag"), "missing_argument"),
        (call(action="left_click", coordinate=[1001, 5]), "bad_argument"),
        (call(action="left_click", coordinate=[-1, 5]), "bad_argument"),
        (call(action="left_click", coordinate=[5]), "bad_argument"),
        (call(action="left_click", coordinate=["5", "5"]), "bad_argument"),
        (call(action="left_click", coordinate=[True, 5]), "bad_argument"),
        (call(action="left_click", coordinate={"x": 1, "y": 2}), "bad_argument"),
        ('<tool_call>{"name": "computer_use", "arguments": {"time": NaN}}</tool_call>', "bad_json"),
        (call(action="scroll"), "missing_argument"),
        (call(action="scroll", pixels=10_000), "bad_argument"),
        (call(action="wait", time=-1), "bad_argument"),
        (call(action="wait", time=3600), "bad_argument"),
        (call(action="terminate"), "bad_argument"),
        (call(action="terminate", status="done"), "bad_argument"),
        (call(action="terminate", status="success") + call(action="wait"), "several_tool_calls"),
        (call(action="wait") * 2, "several_tool_calls"),
        (call(action="wait") + "<tool_call>{}", "several_tool_calls"),
        (
            call(action="wait") + call(action="left_click", coordinate=[2000, 0]),
            "several_tool_calls",
        ),
        (call(action="left_click", coordinate=[2000, 0]), "bad_argument"),
        ("<tool_call>" + "[" * 100_000 + "</tool_call>", "bad_json"),
    ],
)
def test_bad_responses_give_parse_errors(text: str, code: str) -> None:
    actions, error = parse_response(text, SCREEN)
    assert actions == []
    assert error is not None and error.code == code, error
    assert error.message


def test_non_string_response_is_a_parse_error() -> None:
    actions, error = parse_response(None, SCREEN)  # type: ignore[arg-type]
    assert actions == [] and error is not None and error.code == "bad_response"


def test_bad_screen_is_a_caller_error() -> None:
    with pytest.raises(ValueError):
        parse_response("", (0, 1080))
    with pytest.raises(ValueError):
        parse_response("", SCREEN, coords="pixels")  # type: ignore[arg-type]


def test_action_sentence() -> None:
    text = "<think>Action: not this</think>\nAction: Open the File menu.\n" + call(action="wait")
    assert action_sentence(text) == "Open the File menu."
    assert action_sentence("**Action:** Save it.\n<tool_call>") == "Save it."
    assert action_sentence(call(action="wait")) == ""
