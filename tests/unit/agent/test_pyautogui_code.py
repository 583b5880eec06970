"""to_pyautogui: exact code per action, only allowed calls, no injection."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from cua_rl.agent.keys import KEYBOARD_KEYS
from cua_rl.agent.pyautogui_code import is_terminal, terminal_status, to_pyautogui
from cua_rl.types import Action


@pytest.mark.parametrize(
    ("action", "code"),
    [
        (Action("left_click", coordinate=(10, 20)), "pyautogui.click(10, 20)"),
        (Action("left_click"), "pyautogui.click()"),
        (Action("double_click", coordinate=(1, 2)), "pyautogui.doubleClick(1, 2)"),
        (Action("triple_click", coordinate=(1, 2)), "pyautogui.tripleClick(1, 2)"),
        (Action("right_click", coordinate=(1, 2)), "pyautogui.rightClick(1, 2)"),
        (Action("middle_click", coordinate=(1, 2)), "pyautogui.middleClick(1, 2)"),
        (Action("mouse_move", coordinate=(5, 6)), "pyautogui.moveTo(5, 6)"),
        (
            Action("left_click_drag", coordinate=(5, 6)),
            "pyautogui.dragTo(5, 6, duration=0.5, button='left')",
        ),
        (
            Action("left_click_drag", coordinate=(5, 6), start=(1, 2)),
            "pyautogui.moveTo(1, 2)\npyautogui.dragTo(5, 6, duration=0.5, button='left')",
        ),
        (Action("scroll", pixels=-3), "pyautogui.scroll(-3)"),
        (Action("scroll", pixels=3, coordinate=(7, 8)), "pyautogui.scroll(3, x=7, y=8)"),
        (Action("hscroll", pixels=4), "pyautogui.hscroll(4)"),
        (Action("key", keys=("enter",)), "pyautogui.press('enter')"),
        (Action("key", keys=("ctrl", "shift", "t")), "pyautogui.hotkey('ctrl', 'shift', 't')"),
        (Action("key", keys=("'",)), 'pyautogui.press("\'")'),
        (Action("type", text="it's"), 'pyautogui.write("it\'s")'),
        (
            Action("type", text="a\n\nb\n"),
            "pyautogui.write('a')\npyautogui.press('enter')\npyautogui.press('enter')\n"
            "pyautogui.write('b')\npyautogui.press('enter')",
        ),
        (Action("wait", time=2.0), "time.sleep(2.0)"),
        (Action("wait", time=0.0), ""),
        (Action("terminate", status="success"), ""),
    ],
)
def test_code_per_action(action: Action, code: str, safe_code: Callable[[str], None]) -> None:
    assert to_pyautogui([action]) == code
    safe_code(code)


def test_injection_through_text_stays_a_literal(safe_code: Callable[[str], None]) -> None:
    payload = "'); import os; os.system('x') #\\"
    code = to_pyautogui([Action("type", text=payload)])
    safe_code(code)
    assert code == f"pyautogui.write({payload!r})"


@pytest.mark.parametrize(
    "action",
    [
        Action("key", keys=("enter'); os.system('x",)),
        Action("key", keys=()),
        Action("type", text="héllo"),
        Action("type", text=""),
        Action("left_click", coordinate=(True, 2)),  # type: ignore[arg-type]
        Action("left_click", coordinate=(1.5, 2)),  # type: ignore[arg-type]
        Action("left_click", coordinate=(-1, 2)),
        Action("mouse_move"),
        Action("scroll"),
        Action("wait", time=float("nan")),
        Action("wait", time="1); os.system('x'"),  # type: ignore[arg-type]
    ],
)
def test_hand_built_bad_actions_are_refused(action: Action) -> None:
    with pytest.raises(ValueError):
        to_pyautogui([action])


def test_terminal_helpers() -> None:
    assert not is_terminal([Action("wait", time=1.0)])
    assert terminal_status([Action("wait", time=1.0)]) is None
    done = [Action("left_click"), Action("terminate", status="failure")]
    assert is_terminal(done) and terminal_status(done) == "failure"
    assert to_pyautogui(done) == "pyautogui.click()"


def test_key_list_matches_pyautogui() -> None:
    """Our copy of KEYBOARD_KEYS is pyautogui's (read from source: import needs X)."""
    import ast
    import importlib.util
    import pathlib

    spec = importlib.util.find_spec("pyautogui")
    if spec is None or spec.origin is None:
        pytest.skip("pyautogui not installed")
    tree = ast.parse(pathlib.Path(spec.origin).read_text())
    names = next(
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and any(getattr(t, "id", None) == "KEY_NAMES" for t in node.targets)
    )
    assert set(ast.literal_eval(names)) == KEYBOARD_KEYS
