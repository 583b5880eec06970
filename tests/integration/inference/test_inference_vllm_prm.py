"""The reward model's requests on the real vLLM replica: `n` votes in one call, and both
images of the two-image PRM context reach the model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests_support.learner_data import png_data_url
from tests_support.vllm import chat

from cua_rl.agent.messages import prm_messages
from cua_rl.inference.client import InferenceClient

pytestmark = pytest.mark.model


def judge_context(before: str = "green", after: str = "teal") -> list[dict[str, Any]]:
    return prm_messages(
        "Save the file.",
        ["Action: press ctrl+s"],
        png_data_url(before, (288, 192)),
        "I will click Save.",
        png_data_url(after, (288, 192)),
    )


async def test_n_votes_come_back_in_one_call(vllm_server: Any) -> None:
    client = InferenceClient(vllm_server.url, timeout_s=120)
    try:
        result = await client.chat(judge_context(), n=5, temperature=0.8, max_tokens=12, seed=3)
    finally:
        await client.close()
    assert [c.index for c in result.choices] == [0, 1, 2, 3, 4]
    assert isinstance(result.model_version, int)
    for choice in result.choices:
        assert len(choice.token_ids) == len(choice.logprobs) > 0
        assert all(lp <= 0.0 for lp in choice.logprobs)
    assert len({c.token_ids for c in result.choices}) > 1  # independent samples, not copies
    assert result.prompt_token_ids  # what the learner trains on comes back too


def first_token_logprobs(url: str, messages: list[dict[str, Any]]) -> list[float]:
    payload, _ = chat(
        url, {"messages": messages, "temperature": 0, "max_tokens": 1, "top_logprobs": 5}
    )
    return [e["logprob"] for e in payload["choices"][0]["logprobs"]["content"][0]["top_logprobs"]]


def test_both_images_reach_the_model(vllm_server: Any, tiny_model_dir: Path) -> None:
    image_pad = json.loads((tiny_model_dir / "config.json").read_text())["image_token_id"]
    payload, _ = chat(
        vllm_server.url, {"messages": judge_context(), "max_tokens": 1, "temperature": 0}
    )
    pads = payload["prompt_token_ids"].count(image_pad)
    assert pads > 0 and pads % 2 == 0  # two same-sized screenshots, same token count each
    base = first_token_logprobs(vllm_server.url, judge_context())
    assert first_token_logprobs(vllm_server.url, judge_context()) == base  # deterministic
    assert first_token_logprobs(vllm_server.url, judge_context(before="purple")) != base
    assert first_token_logprobs(vllm_server.url, judge_context(after="orange")) != base
