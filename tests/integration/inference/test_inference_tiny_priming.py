"""The format-primed tiny model: temperature-1 samples through the real hf server parse.

Prompts come from the real builders with screenshot-sized images (1920x1080,
encoded as actors encode them), so the check covers what a quickstart run sends.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image, ImageDraw
from tests_support.servers import start_hf_server

from cua_rl.agent import parse_prm_vote, parse_response, policy_messages, prm_messages
from cua_rl.agent.images import encode_image
from cua_rl.agent.messages import boxed_answer, critique_step_messages
from cua_rl.inference.client import InferenceClient

pytestmark = pytest.mark.model

SCREEN = (1920, 1080)


@pytest.fixture(scope="module")
def primed_dir(primed_tiny_model_dir: Path) -> Path:
    return primed_tiny_model_dir  # the session's primed build, shared with other tests


@pytest.fixture(scope="module")
def primed_server(primed_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    server = start_hf_server(primed_dir, tmp_path_factory.mktemp("primed-logs"))
    yield server
    server.kill()


def screenshot(shade: int) -> str:
    image = Image.new("RGB", SCREEN, (shade, shade, 200))
    ImageDraw.Draw(image).rectangle((200, 150, 1100, 800), fill=(240, 240, shade))
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG")
    return encode_image(buffer.getvalue())


async def sample(
    url: str, messages: list[dict], n: int, temperature: float, max_tokens: int
) -> list[str]:
    client = InferenceClient(url, timeout_s=300)
    try:
        result = await client.chat(
            messages, n=n, temperature=temperature, max_tokens=max_tokens, seed=7
        )
    finally:
        await client.close()
    return [choice.text for choice in result.choices]


async def test_policy_samples_mostly_parse(primed_server) -> None:
    shots = [screenshot(s) for s in (30, 90, 150)]
    first = policy_messages("Move all .txt files into the folder notes.", [], shots[:1], SCREEN)
    history = ["Click the target.", "Type the text."]
    responses = [
        'Action: Click the target.\n<tool_call>\n{"name": "computer_use", "arguments": '
        '{"action": "left_click", "coordinate": [500, 300]}}\n</tool_call>',
        'Action: Type the text.\n<tool_call>\n{"name": "computer_use", "arguments": '
        '{"action": "type", "text": "ERROR"}}\n</tool_call>',
    ]
    later = policy_messages(
        "Count the ERROR lines in log.txt.", history, shots, SCREEN, responses=responses
    )
    texts = await sample(primed_server.url, first, 10, 1.0, 64)
    texts += await sample(primed_server.url, later, 10, 1.0, 64)
    parsed = [parse_response(t, SCREEN)[1] is None for t in texts]
    assert sum(parsed) >= 0.6 * len(texts), texts
    assert len(set(texts)) > len(texts) // 2, "samples should stay random"


async def test_reward_model_votes_mostly_parse_and_vary(primed_server) -> None:
    before, after = screenshot(40), screenshot(120)
    response = (
        'Action: Click the target.\n<tool_call>\n{"name": "computer_use", '
        '"arguments": {"action": "left_click", "coordinate": [500, 300]}}\n</tool_call>'
    )
    messages = prm_messages(
        "Rename report.docx to final.docx.", ["Press the keys."], before, response, after
    )
    texts = await sample(primed_server.url, messages, 20, 0.8, 48)
    votes = [parse_prm_vote(t) for t in texts]
    assert sum(v != 0 for v in votes) >= 0.6 * len(votes), texts
    assert 1 in votes and -1 in votes


async def test_critique_answers_are_boxed(primed_server) -> None:
    votes = [
        "The action does not match the task. \\boxed{-1}",
        "The screen changed after the action. \\boxed{1}",
        "I compare the screenshots.",
    ]
    messages = critique_step_messages(1, votes, [-1, 1, 0])
    texts = await sample(primed_server.url, messages, 10, 1.0, 64)
    assert sum(boxed_answer(t) is not None for t in texts) >= 5, texts


def test_same_seed_same_primed_weights(tiny_model_dir: Path) -> None:
    """Priming is seeded: two short warm-ups from the same checkpoint are identical."""
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from cua_rl.inference.tiny_priming import PrimingConfig, prime_tiny_model

    def primed() -> dict[str, Any]:
        model = AutoModelForImageTextToText.from_pretrained(tiny_model_dir)
        processor = AutoProcessor.from_pretrained(tiny_model_dir)
        prime_tiny_model(model, processor, seed=0, cfg=PrimingConfig(steps=12))
        return model.state_dict()

    a, b = primed(), primed()
    assert all(a[k].equal(b[k]) for k in a)
