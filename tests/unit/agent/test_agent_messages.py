"""Message builders: argument checks, vote and boxed-answer parsing, rewrite parsing.
The structure of each prompt is tested in test_prompt_structure.py."""

from __future__ import annotations

import pytest

from cua_rl.agent.messages import (
    boxed_answer,
    parse_prm_vote,
    parse_rewrite,
    policy_messages,
    rewrite_messages,
)

SCREEN = (1920, 1080)


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


def test_rewrite_rejects_bad_direction_and_unknown_evaluator() -> None:
    with pytest.raises(ValueError):
        rewrite_messages("x", {"a": "b"}, [], "sideways")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not in the template"):
        rewrite_messages("b", {"a": "b"}, [], "easier", evaluator="z")


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
        ('I could answer {"red": "x"} but: {"bold": "Bold it."}', ("bold", "Bold it.")),
        ('{"bold": {"nested": "x"}}', None),
        ('{"bold": "Bold it."} then {"red": "Red it."}', ("red", "Red it.")),
        ('{"bold": "Bold it."} and a broken {"red": ', ("bold", "Bold it.")),
    ],
)
def test_parse_rewrite(text: str, expected: tuple[str, str] | None) -> None:
    assert parse_rewrite(text, ["bold", "red"]) == expected
