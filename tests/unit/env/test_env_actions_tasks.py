"""`cua_rl.env` without a desktop: how actions resolve, which task a reset picks,
the settings, the spaces, and that docs/gymnasium.md documents every setting."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from cua_rl.env.actions import resolve
from cua_rl.env.config import EnvConfig
from cua_rl.env.spaces import AnyText, action_space, observation_space
from cua_rl.env.tasks import DEFAULT_LOCAL_TASK, TaskChoice, load_env_tasks
from cua_rl.errors import TaskFormatError

SCREEN = (1920, 1080)
DOC = Path(__file__).resolve().parents[3] / "docs" / "gymnasium.md"


def test_a_tool_call_dict_becomes_safe_pyautogui_code() -> None:
    full = resolve(
        {"name": "computer_use", "arguments": {"action": "left_click", "coordinate": [100, 200]}},
        SCREEN,
        "absolute",
    )
    bare = resolve({"action": "left_click", "coordinate": [100, 200]}, SCREEN, "absolute")
    assert full.code == bare.code == "pyautogui.click(100, 200)" and full.error is None
    relative = resolve({"action": "left_click", "coordinate": [500, 500]}, SCREEN, "relative")
    assert relative.code == "pyautogui.click(960, 540)"
    typed = resolve({"action": "type", "text": "a'); import os; ('"}, SCREEN, "absolute")
    assert typed.code == "pyautogui.write(\"a'); import os; ('\")"


def test_special_actions_and_terminate_calls() -> None:
    assert resolve("WAIT", SCREEN, "absolute").code == ""
    done, fail = resolve(" DONE\n", SCREEN, "absolute"), resolve("FAIL", SCREEN, "absolute")
    assert done.terminal and done.last is not None and done.last.status == "success"
    assert fail.terminal and fail.last is not None and fail.last.status == "failure"
    call = resolve({"action": "terminate", "status": "failure"}, SCREEN, "absolute")
    assert call.terminal and call.code == "" and call.last == fail.last


def test_a_model_response_with_one_tool_call_is_parsed() -> None:
    text = (
        'Action: click\n<tool_call>{"name": "computer_use", "arguments": '
        '{"action": "key", "keys": ["ctrl", "s"]}}</tool_call>'
    )
    act = resolve(text, SCREEN, "absolute")
    assert act.kind == "response" and act.code == "pyautogui.hotkey('ctrl', 's')"


@pytest.mark.parametrize(
    ("action", "code"),
    [
        ({"action": "left_click", "coordinate": [5000, 5]}, "bad_argument"),
        ({"action": "fly"}, "unknown_action"),
        ({"action": "left_click", "coordinate": {1, 2}}, "bad_json"),
        ("pyautogui.click(", "bad_code"),
        ("   ", "empty_action"),
        ("x\x00y", "bad_code"),
        (7, "bad_action"),
        (np.zeros(3), "bad_action"),
        ("<tool_call>{not json}</tool_call>", "bad_json"),
    ],
)
def test_an_action_that_does_not_parse_is_a_no_op_with_its_reason(
    action: object, code: str
) -> None:
    act = resolve(action, SCREEN, "absolute")
    assert act.kind == "invalid" and act.code == "" and not act.terminal
    assert act.error is not None and act.error.code == code, act.error


def test_pyautogui_code_runs_as_written() -> None:
    act = resolve("pyautogui.moveTo(1, 2)\npyautogui.click()", SCREEN, "absolute")
    assert act.kind == "pyautogui" and act.code == "pyautogui.moveTo(1, 2)\npyautogui.click()"


def test_sampled_actions_never_raise() -> None:
    space = action_space()
    space.seed(0)
    for _ in range(50):
        sample = space.sample()
        assert sample in space
        resolve(sample, SCREEN, "absolute")


def test_reset_picks_by_option_variant_json_and_seed() -> None:
    choice = TaskChoice(load_env_tasks("local", None, None))
    rng = np.random.default_rng
    picks = [choice.pick(None, rng(s)).task_id for s in range(8)]
    assert picks == [choice.pick({}, rng(s)).task_id for s in range(8)]
    assert len(set(picks)) > 1
    one = choice.pick({"task": DEFAULT_LOCAL_TASK, "variant": "click_red_corner"}, rng(0))
    assert (one.task_id, one.evaluator_name) == (DEFAULT_LOCAL_TASK, "click_red_corner")
    data = {
        "id": "custom-1",
        "instruction": "Do nothing.",
        "config": [],
        "evaluator": {"func": "infeasible"},
    }
    assert choice.pick({"task": data}, rng(0)).instruction == "Do nothing."
    with pytest.raises(ValueError, match="unknown key"):
        choice.pick({"tasks": DEFAULT_LOCAL_TASK}, rng(0))
    with pytest.raises(ValueError, match="has no variant 'nope'"):
        choice.pick({"task": DEFAULT_LOCAL_TASK, "variant": "nope"}, rng(0))
    with pytest.raises(ValueError, match="not in this environment"):
        choice.pick({"task": "no-such-task"}, rng(0))
    with pytest.raises(TaskFormatError, match=r"\$.instruction"):
        choice.pick({"task": {"id": "x", "evaluator": {"func": "infeasible"}}}, rng(0))


def test_unknown_task_ids_name_the_source() -> None:
    with pytest.raises(TaskFormatError, match="no-such-task"):
        load_env_tasks("local", "no-such-task", None)


def test_settings_are_checked_and_size_the_observation() -> None:
    cfg = EnvConfig.model_validate(
        {"provider": {"width": 1280, "height": 720}, "accessibility_tree": True}
    )
    space = observation_space(cfg)
    assert space["screenshot"].shape == (720, 1280, 3)
    assert "\u00e9t\u00e9 \u4e2d\u6587" in space["instruction"]
    assert set(space) == {"screenshot", "instruction", "accessibility_tree"}
    with pytest.raises(ValidationError, match="max_steps"):
        EnvConfig.model_validate({"max_steps": 0})
    with pytest.raises(ValidationError, match="http"):
        EnvConfig.model_validate({"judge_urls": ["localhost:8000"]})
    with pytest.raises(ValidationError, match="Extra inputs"):
        EnvConfig.model_validate({"max_step": 3})
    assert not AnyText(5).contains(b"bytes") and not AnyText(2).contains("three")


def test_the_docs_page_lists_every_setting() -> None:
    text = DOC.read_text()
    missing = [name for name in EnvConfig.model_fields if f"`{name}`" not in text]
    assert missing == []


def test_osworld_v0_needs_a_checkout_and_loads_its_tasks(tmp_path: Path) -> None:
    import json

    import gymnasium

    import cua_rl.env  # noqa: F401  registers the ids
    from cua_rl.errors import ConfigError

    with pytest.raises(ConfigError, match="osworld=PATH"):
        gymnasium.make("cua_rl/OSWorld-v0")
    folder = tmp_path / "evaluation_examples" / "examples" / "os"
    folder.mkdir(parents=True)
    task = {
        "id": "t-1",
        "instruction": "Say nothing.",
        "config": [],
        "evaluator": {"func": "infeasible"},
    }
    (folder / "t-1.json").write_text(json.dumps(task))
    (tmp_path / "evaluation_examples" / "test_small.json").write_text('{"os": ["t-1"]}')
    env = gymnasium.make(
        "cua_rl/OSWorld-v0", osworld=str(tmp_path), split="test_small", max_steps=3
    )  # constructing starts no desktop
    assert [v[0].task_id for v in env.unwrapped.tasks.task_set] == ["t-1"]
    assert env.unwrapped.config.max_steps == 3
    env.close()
