"""The structure of the four model calls (stated in cua_rl/agent/prompts.py): message
order and roles, where the images go, and the constraints each prompt states."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from cua_rl.agent import prompts
from cua_rl.agent.messages import (
    critique_step_messages,
    critique_trajectory_messages,
    policy_messages,
    prm_messages,
    rewrite_messages,
)
from cua_rl.agent.parse import parse_response

SCREEN = (1920, 1080)
CALL = '<tool_call>\n{"name": "computer_use", "arguments": {"action": "wait"}}\n</tool_call>'


def shape(messages: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    """(role, part kinds) per message: "text" for a string or text part, "image" for one."""
    out = []
    for m in messages:
        content = m["content"]
        if isinstance(content, str):
            out.append((m["role"], ["text"]))
        else:
            out.append(
                (m["role"], ["image" if p["type"] == "image_url" else "text" for p in content])
            )
    return out


def image_urls(messages: list[dict[str, Any]]) -> list[str]:
    return [
        p["image_url"]["url"]
        for m in messages
        if isinstance(m["content"], list)
        for p in m["content"]
        if p["type"] == "image_url"
    ]


def last_text(message: dict[str, Any]) -> str:
    content = message["content"]
    return content if isinstance(content, str) else content[-1]["text"]


# --- policy ---------------------------------------------------------------------------------


def test_policy_system_has_tools_block_and_one_call_format() -> None:
    system = policy_messages("t", [], ["s0"], SCREEN)[0]
    assert system["role"] == "system"
    text = system["content"]
    assert text.startswith("# Tools") and "<tools>\n{" in text and "\n</tools>" in text
    tool = json.loads(text.split("<tools>\n", 1)[1].split("\n</tools>", 1)[0])
    assert tool["function"]["name"] == "computer_use"
    assert "terminate" in tool["function"]["parameters"]["properties"]["action"]["enum"]
    assert '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}' in text
    assert "Action:" in text and "Exactly one <tool_call>" in text
    assert "action=terminate" in text
    assert text.index("</tools>") < text.index("# Response format")


def test_policy_first_step_is_system_then_screenshot_then_text() -> None:
    messages = policy_messages("Open the file", [], ["data:s0"], SCREEN)
    assert shape(messages) == [("system", ["text"]), ("user", ["image", "text"])]
    text = last_text(messages[-1])
    assert "Instruction: Open the file" in text and text.endswith("Previous actions:\nNone")


@pytest.mark.parametrize("steps", [1, 2, 3, 5, 12])
def test_policy_replays_at_most_two_steps_and_lists_all_actions(steps: int) -> None:
    history = [f"Do thing {i}." for i in range(steps)]
    responses = [f"<think>why {i}</think>Action: Do thing {i}.\n{CALL}" for i in range(steps)]
    shots = [f"data:s{i}" for i in range(steps + 1)]
    messages = policy_messages("task", history, shots, SCREEN, responses=responses)
    replayed = min(steps, 2)
    assert shape(messages) == [
        ("system", ["text"]),
        *[("user", ["image"]), ("assistant", ["text"])] * replayed,
        ("user", ["image", "text"]),
    ]
    # One screenshot per replayed step, in order, then the current one: at most 3.
    assert image_urls(messages) == shots[-(replayed + 1) :]
    assert [m["content"] for m in messages if m["role"] == "assistant"] == responses[-replayed:]
    request = last_text(messages[-1])
    lines = request.split("Previous actions:\n", 1)[1].splitlines()
    assert lines == [f"Step {i + 1}: Do thing {i}." for i in range(steps)]
    assert "Instruction: task" in request
    assert not re.search(r"\{(instruction|history)\}", request)


def test_policy_with_fewer_screenshots_replays_only_those() -> None:
    messages = policy_messages("t", [f"a{i}." for i in range(6)], ["x5", "x6"], SCREEN)
    assert image_urls(messages) == ["x5", "x6"]
    assert [m["content"] for m in messages if m["role"] == "assistant"] == ["Action: a5."]
    assert "Step 1: a0.\n" in last_text(messages[-1])


def test_policy_max_images_bounds_the_replayed_steps() -> None:
    messages = policy_messages("t", ["a.", "b."], ["x", "y", "z"], SCREEN, max_images=1)
    assert shape(messages) == [("system", ["text"]), ("user", ["image", "text"])]
    assert image_urls(messages) == ["z"]


@pytest.mark.parametrize(("calls", "ok"), [(1, True), (2, False), (3, False)])
def test_exactly_one_tool_call_is_accepted(calls: int, ok: bool) -> None:
    actions, error = parse_response("Action: Wait.\n" + CALL * calls, SCREEN)
    assert (error is None) is ok
    assert len(actions) == (1 if ok else 0)
    if not ok:
        assert error is not None and error.code == "several_tool_calls"


# --- reward model ---------------------------------------------------------------------------


def test_prm_is_one_user_turn_with_before_then_after() -> None:
    response = f"<think>The menu is open.</think>Action: Click Save.\n{CALL}"
    messages = prm_messages(
        "Save the file.", ["Open the menu.", "Click File."], "data:before", response, "data:after"
    )
    assert shape(messages) == [("user", ["text", "text", "image", "text", "text", "image", "text"])]
    assert image_urls(messages) == ["data:before", "data:after"]
    parts = [p.get("text", "") for p in messages[0]["content"]]
    assert parts[0] == "Previous Actions:\nStep 1: Open the menu.\nStep 2: Click File."
    assert "Environment image" in parts[1]
    assert parts[3] == f"Agent action: Action: Click Save.\n{CALL}"  # without the thinking
    assert "Current observation" in parts[4]
    task = parts[6]
    assert "strict evaluator" in task and "most recent step" in task
    assert "Save the file." in task and response in task  # objective + full response
    assert "final outcome" in task
    assert task.rstrip().endswith("\\boxed{1} for a good step or \\boxed{-1} for a bad step.")


def test_prm_without_prior_steps_says_none_and_states_a_parse_error() -> None:
    messages = prm_messages("t", [], "b", "junk", "a", parse_error="no_tool_call: none")
    parts = [p.get("text", "") for p in messages[0]["content"]]
    assert parts[0] == "Previous Actions:\nNone"
    assert "nothing was executed" in parts[3] and "no_tool_call: none" in parts[3]
    assert "could not be executed (no_tool_call: none)" in parts[6] and "junk" in parts[6]


# --- critique -------------------------------------------------------------------------------


def test_critique_step_stage_carries_all_votes_with_their_scores() -> None:
    votes = ["Wrong icon. \\boxed{-1}", "Fine. \\boxed{1}", "No score here."]
    messages = critique_step_messages(4, votes, [-1, 1, 0])
    assert shape(messages) == [("user", ["text"])]
    text = messages[0]["content"]
    assert "step 5" in text
    for i, (vote, score) in enumerate(zip(votes, [-1, 1, 0], strict=True)):
        assert f"Judgement {i + 1} (score {score}):\n{vote}" in text
    assert "at most 2 sentences" in text and "failure mode" in text
    assert "Answer only" in text and "\\boxed{...}" in text
    with pytest.raises(ValueError):
        critique_step_messages(0, votes, [-1, 1])


def test_critique_trajectory_stage_reads_a_json_list() -> None:
    summaries = ["Clicked the wrong menu.", 'Typed "x" in the wrong field.']
    messages = critique_trajectory_messages(summaries)
    assert shape(messages) == [("user", ["text"])]
    text = messages[0]["content"]
    listed = text[text.index("[") : text.index("]") + 1]
    assert json.loads(listed) == summaries
    assert "at most 2 sentences" in text and "once" in text
    assert text.index("Reason") < text.index("\\boxed{...}")


# --- rewriter -------------------------------------------------------------------------------

TEMPLATE = {"bold_title": "Make the title bold.", "bold_and_red": "Make it bold and red."}


@pytest.mark.parametrize("direction", ["harder", "easier"])
def test_rewrite_shows_goal_one_key_task_template_and_unique_summaries(direction: str) -> None:
    summaries = ["Clicked the wrong menu.", "Clicked the wrong menu.", " ", "Typed too early."]
    messages = rewrite_messages(
        "Make the title bold. Hint: use ctrl+b.",
        TEMPLATE,
        summaries,
        direction,
        evaluator="bold_title",
    )  # type: ignore[arg-type]
    assert shape(messages) == [("user", ["text"])]
    text = messages[0]["content"]
    assert f"Goal: {direction}" in text
    current = json.dumps({"bold_title": "Make the title bold. Hint: use ctrl+b."})
    assert f"\n{current}\n" in text
    assert json.dumps(TEMPLATE, indent=2) in text
    assert text.count("Clicked the wrong menu.") == 1 and "- Typed too early." in text
    assert prompts.REWRITE_GUIDANCE[direction] in text
    assert "exactly one key" in text and "never invent" in text
    assert "must come last" in text
    assert not re.search(r"\{(goal|current|template|summaries|guidance)\}", text)


def test_rewrite_infers_the_current_evaluator_and_says_none_without_summaries() -> None:
    text = rewrite_messages("Make it bold and red. Hint: Format menu.", TEMPLATE, [], "harder")[0][
        "content"
    ]
    assert '{"bold_and_red": "Make it bold and red. Hint: Format menu."}' in text
    assert "previous attempts:\nNone" in text


def test_actor_context_lists_every_step_and_replays_the_last_two() -> None:
    """agent.context.step_messages, as actors and the learner build the policy prompt."""
    from cua_rl.agent.context import history_line, step_messages
    from cua_rl.rollout.config import EpisodeConfig
    from cua_rl.types import ParseError, Step

    def step(i: int, response: str, error: ParseError | None = None) -> Step:
        return Step(i, f"h{i}", response, (), error, "", f"h{i + 1}")

    steps = [
        step(0, f"Action: Open the menu.\n{CALL}"),
        step(1, "gibberish", ParseError("no_tool_call", "none")),
        step(2, CALL),
        step(3, f"Action: Click Save.\n{CALL}"),
    ]
    assert [history_line(s) for s in steps] == [
        "Open the menu.",
        prompts.NO_OP_ACTION,
        prompts.NO_ACTION_SENTENCE,
        "Click Save.",
    ]
    urls = [f"data:s{i}" for i in range(5)]
    messages = step_messages("Save it.", steps, urls, SCREEN, EpisodeConfig())
    assert image_urls(messages) == urls[-3:]
    assert [m["content"] for m in messages if m["role"] == "assistant"] == [
        s.response for s in steps[-2:]
    ]
    lines = last_text(messages[-1]).split("Previous actions:\n", 1)[1].splitlines()
    assert lines == [f"Step {i + 1}: {history_line(s)}" for i, s in enumerate(steps)]
    model_written = rewrite_messages(
        "Put the title in bold and make it red.", TEMPLATE, [], "easier"
    )[0]["content"]
    assert '{"bold_and_red": "Put the title in bold and make it red."}' in model_written
