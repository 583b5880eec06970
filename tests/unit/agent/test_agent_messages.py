"""Message builders: policy window of 3 images, PRM two-image context, vote parsing,
critique and rewrite prompts."""

from __future__ import annotations

import json
import re

import pytest

from cua_rl.agent.messages import (
    boxed_answer,
    critique_step_messages,
    critique_trajectory_messages,
    parse_prm_vote,
    parse_rewrite,
    policy_messages,
    prm_messages,
    rewrite_messages,
)

SCREEN = (1920, 1080)


def images(messages: list[dict]) -> list[str]:
    return [
        part["image_url"]["url"]
        for m in messages
        if isinstance(m["content"], list)
        for part in m["content"]
        if part["type"] == "image_url"
    ]


def test_first_step_is_system_then_instruction_with_screenshot() -> None:
    messages = policy_messages("Open the file", [], ["data:s0"], SCREEN)
    assert [m["role"] for m in messages] == ["system", "user"]
    assert "<tools>" in messages[0]["content"] and "computer_use" in messages[0]["content"]
    text = messages[1]["content"][0]["text"]
    assert "Instruction: Open the file" in text and "Previous actions:\nNone" in text
    assert images(messages) == ["data:s0"]


@pytest.mark.parametrize("steps", [1, 2, 3, 5, 12])
def test_policy_keeps_only_last_three_screenshots(steps: int) -> None:
    history = [f"do {i}" for i in range(steps)]
    responses = [f"Action: do {i}\n<tool_call>{{}}</tool_call>" for i in range(steps)]
    shots = [f"data:s{i}" for i in range(steps + 1)]
    messages = policy_messages("task", history, shots, SCREEN, responses=responses)
    shown = images(messages)
    assert shown == shots[-3:]
    assert shown[-1] == f"data:s{steps}" and messages[-1]["role"] == "user"
    roles = [m["role"] for m in messages]
    assert roles == ["system", "user"] + ["assistant", "user"] * (len(shown) - 1)
    text = messages[1]["content"][0]["text"]
    in_text = steps - (len(shown) - 1)
    for i in range(steps):
        assert (f"Step {i + 1}: do {i}" in text) == (i < in_text)
    replayed = [m["content"] for m in messages if m["role"] == "assistant"]
    assert replayed == responses[in_text:]


def test_policy_without_responses_replays_history_lines() -> None:
    messages = policy_messages("t", ["Click OK.", "Action: Type."], ["a", "b", "c"], SCREEN)
    assert [m["content"] for m in messages if m["role"] == "assistant"] == [
        "Action: Click OK.",
        "Action: Type.",
    ]


def test_policy_accepts_truncated_screenshot_list() -> None:
    messages = policy_messages("t", [f"s{i}" for i in range(6)], ["x4", "x5", "x6"], SCREEN)
    assert images(messages) == ["x4", "x5", "x6"]
    assert "Step 4: s3" in messages[1]["content"][0]["text"]
    assert "Step 5: s4" not in messages[1]["content"][0]["text"]


def test_policy_system_prompt_states_coordinate_space() -> None:
    relative = policy_messages("t", [], ["a"], SCREEN)[0]["content"]
    absolute = policy_messages("t", [], ["a"], SCREEN, "absolute", image_size=(1504, 832))[0]
    assert "resolution is 1000x1000" in relative
    assert "resolution is 1504x832" in absolute["content"]


def test_policy_rejects_misaligned_inputs() -> None:
    with pytest.raises(ValueError):
        policy_messages("t", [], [], SCREEN)
    with pytest.raises(ValueError):
        policy_messages("t", ["a"], ["x", "y", "z"], SCREEN)
    with pytest.raises(ValueError):
        policy_messages("t", ["a"], ["x"], SCREEN, responses=[])


def test_prm_context_has_two_images_in_order() -> None:
    messages = prm_messages("task", ["Click A."], "data:before", "Action: B", "data:after")
    assert images(messages) == ["data:before", "data:after"]
    texts = [p["text"] for p in messages[1]["content"] if p["type"] == "text"]
    assert any("Step 1: Click A." in t for t in texts)
    assert any("Action: B" in t for t in texts)
    assert "\\boxed{1}" in messages[0]["content"] and "\\boxed{-1}" in messages[0]["content"]
    with_error = prm_messages("t", [], "b", "junk", "a", parse_error="no_tool_call: none")
    assert any("no_tool_call: none" in p.get("text", "") for p in with_error[1]["content"])


@pytest.mark.parametrize(
    ("text", "vote"),
    [
        ("good step \\boxed{1}", 1),
        ("\\boxed{-1}", -1),
        ("\\boxed{ +1 }", 1),
        ("first \\boxed{1} then reconsider \\boxed{-1}", -1),
        ("\\boxed{-1} ... final \\boxed{1}", 1),
        ("\\boxed{0}", 0),
        ("\\boxed{yes}", 0),
        ("\\boxed{\\text{1}}", 0),
        ("boxed{1}", 0),
        ("\\boxed{1", 0),
        ("", 0),
        ("the answer is 1", 0),
    ],
)
def test_parse_prm_vote(text: str, vote: int) -> None:
    assert parse_prm_vote(text) == vote


def test_boxed_answer() -> None:
    assert boxed_answer("x \\boxed{The agent clicked the wrong menu.}") == (
        "The agent clicked the wrong menu."
    )
    assert boxed_answer("nothing") is None


def test_critique_prompts_ask_for_boxed_two_sentences() -> None:
    step = critique_step_messages("task", 2, "Action: click", ["It missed.", "Wrong icon."])
    text = step[0]["content"]
    assert "Step 3" in text and "It missed." in text and "\\boxed{...}" in text
    assert "at most 2 sentences" in text
    trajectory = critique_trajectory_messages("task", ["missed icon"], -1)
    assert "failed" in trajectory[0]["content"] and "- missed icon" in trajectory[0]["content"]
    assert "at most 2 sentences" in trajectory[0]["content"]


@pytest.mark.parametrize("direction", ["harder", "easier"])
def test_rewrite_prompt_lists_template_and_asks_for_one_key(direction: str) -> None:
    template = {"bold_title": "Make the title bold.", "bold_and_red": "Make it bold and red."}
    text = rewrite_messages("Make the title bold.", template, ["slow"], direction)[0]["content"]
    assert json.dumps(template, indent=2) in text
    assert "exactly one key" in text and direction in text
    assert not re.search(r"\{(instruction|template|direction)\}", text)


def test_rewrite_rejects_bad_direction() -> None:
    with pytest.raises(ValueError):
        rewrite_messages("x", {"a": "b"}, [], "sideways")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"bold": "Make it bold."}', ("bold", "Make it bold.")),
        ('<think>{"red": "no"}</think>```json\n{"bold": " Bold it. "}\n```', ("bold", "Bold it.")),
        ('{"bold": "a", "red": "b"}', None),
        ('{"italic": "a"}', None),
        ('{"bold": ""}', None),
        ('{"bold": 3}', None),
        ("not json", None),
        ("{bold: 1}", None),
    ],
)
def test_parse_rewrite(text: str, expected: tuple[str, str] | None) -> None:
    assert parse_rewrite(text, ["bold", "red"]) == expected
