"""Prompts shaped like the actors' (policy and reward model) for learner tests."""

from __future__ import annotations

import base64
import io
import json
import urllib.request
from typing import Any

from PIL import Image

from cua_rl.agent.messages import policy_messages, prm_messages
from cua_rl.types import StepSample


def png_data_url(color: str, size: tuple[int, int]) -> str:
    buf = io.BytesIO()
    image = Image.new("RGB", size, color)
    image.paste(Image.new("RGB", (size[0] // 2, size[1] // 3), "white"), (5, 7))
    image.save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def prompts() -> list[list[dict[str, Any]]]:
    """A two-image policy turn (with a replayed response) and a two-image PRM prompt."""
    policy = policy_messages(
        "Open the File menu.",
        ["Action: click the menu bar"],
        [png_data_url("red", (320, 200)), png_data_url("navy", (256, 160))],
        (1920, 1080),
        responses=['<tool_call>\n{"name": "computer_use"}\n</tool_call>'],
    )
    prm = prm_messages(
        "Save the file.",
        ["Action: press ctrl+s"],
        png_data_url("green", (288, 192)),
        "I will click Save.",
        png_data_url("teal", (288, 192)),
    )
    return [policy, prm]


def sample_from_server(
    url: str,
    messages: list[dict[str, Any]],
    *,
    n: int,
    temperature: float,
    seed: int,
    max_tokens: int = 16,
) -> list[StepSample]:
    """Ask a real server for `n` completions and turn each into a StepSample."""
    body = {
        "messages": messages,
        "n": n,
        "temperature": temperature,
        "seed": seed,
        "max_tokens": max_tokens,
        "logprobs": True,
    }
    request = urllib.request.Request(
        url + "/v1/chat/completions",
        json.dumps(body).encode(),
        {"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        payload = json.loads(response.read())
        version = int(response.headers["x-model-version"])
    return [
        StepSample(
            tuple(messages),
            tuple(c["token_ids"]),
            tuple(e["logprob"] for e in c["logprobs"]["content"]),
            version,
            advantage=1.0 if i % 2 == 0 else -1.0,
        )
        for i, c in enumerate(payload["choices"])
    ]


def prompt_token_ids(url: str, messages: list[dict[str, Any]]) -> list[int]:
    body = {"messages": messages, "max_tokens": 1, "temperature": 0}
    request = urllib.request.Request(
        url + "/v1/chat/completions",
        json.dumps(body).encode(),
        {"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.loads(response.read())["prompt_token_ids"]
