"""Property tests: parse never raises on any text, and whatever it accepts renders to
code made only of allowed calls with literal arguments."""

from __future__ import annotations

import json
from collections.abc import Callable

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cua_rl.agent.parse import parse_response
from cua_rl.agent.pyautogui_code import to_pyautogui
from cua_rl.agent.tool_schema import ACTIONS

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
INJECTIONS = [
    "'); import os; os.system('x",
    "enter'); os.system('x",
    '"); __import__("os").system("x")',
    "\\'; exit() #",
    "${HOME}`id`",
    "</tool_call><tool_call>",
    "\n\npyautogui.FAILSAFE=False",
    "ctrl+'); os.system('x",
]
screens = st.tuples(st.integers(1, 8000), st.integers(1, 8000))
json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4)
    ),
    max_leaves=12,
)
argument_values = st.one_of(
    json_values,
    st.sampled_from(INJECTIONS),
    st.lists(st.sampled_from(INJECTIONS) | st.text(max_size=12), max_size=4),
    st.lists(st.integers(-50, 1100) | st.floats(-50, 1100), min_size=2, max_size=2),
    st.sampled_from(["success", "failure", "enter", "ctrl+c", ["ctrl", "c"], "Return"]),
)
arguments = st.fixed_dictionaries(
    {"action": st.sampled_from(ACTIONS) | st.text(max_size=10)},
    optional={
        name: argument_values
        for name in ("keys", "text", "coordinate", "start_coordinate", "pixels", "time", "status")
    },
)


def tool_call(args: dict) -> str:
    return "<tool_call>" + json.dumps({"name": "computer_use", "arguments": args}) + "</tool_call>"


def check(
    safe_code: Callable[[str], None], text: str, screen: tuple[int, int], coords: str = "relative"
) -> None:
    """Parse must not raise; an error means no actions; accepted actions render safely."""
    actions, error = parse_response(text, screen, coords)  # type: ignore[arg-type]
    assert bool(actions) == (error is None)
    if error is None:
        safe_code(to_pyautogui(actions))
        for action in actions:
            for point in (action.coordinate, action.start):
                if point is not None:
                    assert 0 <= point[0] < screen[0] and 0 <= point[1] < screen[1]


@SETTINGS
@given(text=st.text(max_size=300), screen=screens)
def test_random_text_never_raises(
    safe_code: Callable[[str], None], text: str, screen: tuple[int, int]
) -> None:
    check(safe_code, text, screen)


@SETTINGS
@given(
    prefix=st.text(max_size=40),
    calls=st.lists(arguments, min_size=1, max_size=3),
    screen=screens,
    coords=st.sampled_from(["relative", "absolute"]),
)
def test_random_tool_calls_parse_to_safe_code(
    safe_code: Callable[[str], None],
    prefix: str,
    calls: list[dict],
    screen: tuple[int, int],
    coords: str,
) -> None:
    check(
        safe_code, prefix + "Action: act.\n" + "".join(tool_call(c) for c in calls), screen, coords
    )


@SETTINGS
@given(
    text=st.sampled_from(INJECTIONS) | st.text(alphabet=st.characters(max_codepoint=0x7F)),
    key=st.sampled_from(INJECTIONS) | st.text(max_size=8),
)
def test_injection_attempts_stay_literals(
    safe_code: Callable[[str], None], text: str, key: str
) -> None:
    for args in ({"action": "type", "text": text}, {"action": "key", "keys": [key, "c"]}):
        actions, error = parse_response(tool_call(args), (1920, 1080))
        if error is None:
            code = to_pyautogui(actions)
            safe_code(code)
            if args["action"] == "type":
                assert "".join(a.text or "" for a in actions) == text.replace("\r\n", "\n").replace(
                    "\r", "\n"
                )


@SETTINGS
@given(
    body=st.text(max_size=200),
    wrap=st.sampled_from(["<tool_call>{}</tool_call>", "<tool_call>{}", "<think>{}</think>", "{}"]),
)
def test_mangled_blocks_never_raise(safe_code: Callable[[str], None], body: str, wrap: str) -> None:
    check(safe_code, wrap.format(body), (1280, 720))


typable = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E) | st.just("\n"))
grid = st.integers(0, 1000) | st.floats(0, 1000)
point = st.lists(grid, min_size=2, max_size=2)
key_names = st.sampled_from(
    ["ctrl", "Control", "shift", "alt", "Return", "enter", "esc", "Tab", "a", "Z", "F5", "'", '"']
)
valid_arguments = st.one_of(
    st.fixed_dictionaries(
        {"action": st.just("key"), "keys": st.lists(key_names, min_size=1, max_size=4)}
    ),
    st.fixed_dictionaries({"action": st.just("type"), "text": typable.filter(bool)}),
    st.fixed_dictionaries(
        {"action": st.sampled_from(["mouse_move", "left_click_drag"]), "coordinate": point}
    ),
    st.fixed_dictionaries(
        {
            "action": st.sampled_from(
                ["left_click", "right_click", "middle_click", "double_click", "triple_click"]
            )
        },
        optional={"coordinate": point},
    ),
    st.fixed_dictionaries(
        {"action": st.sampled_from(["scroll", "hscroll"]), "pixels": st.integers(-200, 200)},
        optional={"coordinate": point},
    ),
    st.fixed_dictionaries({"action": st.just("wait")}, optional={"time": st.floats(0, 60)}),
)


@SETTINGS
@given(call=valid_arguments, screen=screens, done=st.booleans())
def test_valid_tool_call_is_accepted_and_safe(
    safe_code: Callable[[str], None], call: dict, screen: tuple[int, int], done: bool
) -> None:
    if done:
        call = {"action": "terminate", "status": "success"}
    actions, error = parse_response("Action: act.\n" + tool_call(call), screen)
    assert error is None, error
    assert [a.kind for a in actions] == [call["action"]]
    safe_code(to_pyautogui(actions))


@SETTINGS
@given(calls=st.lists(valid_arguments, min_size=2, max_size=4), screen=screens)
def test_several_valid_tool_calls_are_one_parse_error(
    calls: list[dict], screen: tuple[int, int]
) -> None:
    actions, error = parse_response("Action: act.\n" + "".join(tool_call(c) for c in calls), screen)
    assert actions == [] and error is not None and error.code == "several_tool_calls"
