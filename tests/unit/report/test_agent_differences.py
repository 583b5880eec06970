"""Our side of each row of docs/evaluation-deviations.md's agent table, as the eval
preset sets it and as the manifest records it: JPEG at quality 90, three
screenshots, a `Step k:` line per past step, at most 1,310,720 pixels, a 0..1000
grid, greedy sampling with 4,096 tokens, a settle poll and 5 s after each action."""

from __future__ import annotations

import pytest

from cua_rl.agent import policy_messages
from cua_rl.agent.tool_schema import coordinate_space
from cua_rl.config import RunConfig, load_config
from cua_rl.report.manifest.agent import agent_section


@pytest.fixture(scope="module")
def agent() -> dict:
    return agent_section(load_config(RunConfig, preset="osworld-verified-eval"))


def test_screenshots_are_jpeg_at_quality_90(agent: dict) -> None:
    assert (agent["screenshot_format"], agent["screenshot_quality"]) == ("jpeg", 90)


def test_the_context_holds_three_screenshots(agent: dict) -> None:
    assert agent["history_images"] == 3
    messages = policy_messages(
        "task",
        [f"step {i}" for i in range(5)],
        [f"shot {i}" for i in range(6)],
        (1920, 1080),
        responses=[f"reply {i}" for i in range(5)],
        max_images=3,
    )
    images = [
        part
        for m in messages
        if isinstance(m["content"], list)
        for part in m["content"]
        if part["type"] == "image_url"
    ]
    assert [i["image_url"]["url"] for i in images] == ["shot 3", "shot 4", "shot 5"]


def test_every_past_step_is_a_step_line() -> None:
    messages = policy_messages(
        "task",
        [f"did {i}" for i in range(5)],
        [f"shot {i}" for i in range(6)],
        (1920, 1080),
        responses=[f"reply {i}" for i in range(5)],
        max_images=3,
    )
    request = messages[-1]["content"][-1]["text"]
    assert all(f"Step {i + 1}: did {i}" in request for i in range(5))


def test_the_model_sees_at_most_1310720_pixels(agent: dict) -> None:
    assert agent["max_pixels"] == 1_310_720
    assert agent["model_image_size"] == [1504, 832]


def test_relative_coordinates_are_on_a_1000_grid(agent: dict) -> None:
    assert agent["coords"] == "relative"
    assert coordinate_space((1920, 1080), "relative") == (1000, 1000)


def test_sampling_is_greedy_with_top_p_1_and_4096_tokens(agent: dict) -> None:
    assert agent["sampling"] == {"temperature": 0.0, "top_p": 1.0, "max_tokens": 4096}


def test_waits_are_a_settle_poll_and_5_s_after_each_action(agent: dict) -> None:
    assert (agent["settle_max_s"], agent["wait_after_action_s"]) == (10.0, 5.0)
