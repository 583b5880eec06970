"""The hf engine server: protocol shape, exact behavior logprobs, weight updates."""

from __future__ import annotations

import asyncio
import base64
import io
from pathlib import Path

import aiohttp
import pytest
from PIL import Image

from cua_rl.inference.client import InferenceClient

pytestmark = pytest.mark.model


def png_data_url(color: str, size: tuple[int, int]) -> str:
    buf = io.BytesIO()
    image = Image.new("RGB", size, color)
    image.paste(Image.new("RGB", (size[0] // 2, size[1] // 3), "white"), (5, 7))
    image.save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def two_screenshot_messages() -> list[dict]:
    return [
        {"role": "system", "content": "You operate a computer."},
        {"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": png_data_url("red", (320, 200))}},
            {"type": "text", "text": "Before. "},
            {"type": "image_url", "image_url": {"url": png_data_url("blue", (256, 192))}},
            {"type": "text", "text": "After. Was the step correct?"},
        ]},
    ]  # fmt: skip


async def post(url: str, route: str, body: object) -> tuple[int, dict, dict]:
    async with aiohttp.ClientSession() as session:
        async with session.post(url + route, json=body) as response:
            return response.status, await response.json(), dict(response.headers)


async def test_two_screenshots_n3_returns_logprobs_and_ids(hf_server) -> None:
    body = {
        "messages": two_screenshot_messages(),
        "n": 3,
        "temperature": 0.8,
        "max_tokens": 12,
        "logprobs": True,
        "seed": 3,
    }
    status, payload, headers = await post(hf_server.url, "/v1/chat/completions", body)
    assert status == 200, payload
    assert headers["x-model-version"] == "0"
    assert len(payload["choices"]) == 3
    for choice in payload["choices"]:
        ids = choice["token_ids"]
        content = choice["logprobs"]["content"]
        assert 1 <= len(ids) <= 12 and len(content) == len(ids)
        assert all(entry["logprob"] <= 0.0 and "token" in entry for entry in content)
        assert choice["finish_reason"] in ("stop", "length")
    assert payload["usage"]["prompt_tokens"] == len(payload["prompt_token_ids"])


async def test_logprobs_match_a_direct_forward_pass(hf_server, tiny_model_dir: Path) -> None:
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor

    temperature = 0.7
    messages = two_screenshot_messages()
    client = InferenceClient(hf_server.url, timeout_s=120)
    result = await client.chat(messages, n=2, temperature=temperature, max_tokens=10, seed=11)
    await client.close()

    processor = AutoProcessor.from_pretrained(tiny_model_dir)
    model = AutoModelForImageTextToText.from_pretrained(tiny_model_dir).eval()
    images = [
        Image.open(io.BytesIO(base64.b64decode(part["image_url"]["url"].split(",")[1]))).convert(
            "RGB"
        )
        for part in messages[1]["content"]
        if part["type"] == "image_url"
    ]
    text = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    inputs = processor(text=[text], images=images, return_tensors="pt")
    prompt = inputs["input_ids"][0].tolist()
    assert list(result.prompt_token_ids) == prompt
    for choice in result.choices:
        ids = torch.tensor([prompt + list(choice.token_ids)])
        mm = (ids == model.config.image_token_id).int()
        with torch.no_grad():
            logits = model(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                pixel_values=inputs["pixel_values"],
                image_grid_thw=inputs["image_grid_thw"],
                mm_token_type_ids=mm,
            ).logits
        steps = logits[0, len(prompt) - 1 : -1].float() / temperature
        expected = torch.log_softmax(steps, -1).gather(-1, torch.tensor(choice.token_ids)[:, None])
        got = torch.tensor(choice.logprobs)
        assert torch.allclose(expected[:, 0], got, atol=1e-4), (expected[:, 0], got)


async def test_greedy_is_deterministic_and_concurrent_requests_all_complete(hf_server) -> None:
    client = InferenceClient(hf_server.url, timeout_s=120)
    messages = [{"role": "user", "content": "Open the File menu."}]
    results = await asyncio.gather(
        *(client.chat(messages, temperature=0.0, max_tokens=8) for _ in range(6))
    )
    await client.close()
    assert len({r.choices[0].token_ids for r in results}) == 1


@pytest.mark.parametrize(
    ("patch", "param"),
    [
        ({"n": 0}, "n"),
        ({"top_p": 2}, "top_p"),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "image_url", "image_url": {"url": "file:///etc/passwd"}}
                        ],
                    }
                ]
            },
            "messages.0.content.0.image_url.url",
        ),
    ],
)
async def test_bad_requests_get_400_naming_the_field(hf_server, patch: dict, param: str) -> None:
    body = {"messages": [{"role": "user", "content": "hi"}], **patch}
    status, payload, headers = await post(hf_server.url, "/v1/chat/completions", body)
    assert status == 400
    assert payload["error"]["param"] == param
    assert "x-model-version" in headers


@pytest.mark.parametrize(
    ("collective", "param"),
    [
        ({"bucket_bytes": -1}, "collective.bucket_bytes"),
        ({"bucket_bytes": "64"}, "collective.bucket_bytes"),
        ({"manifest": [{"name": "w", "shape": [2], "dtype": "int8"}]}, "collective.manifest"),
        ({"manifest": [{"name": "w", "shape": [-2], "dtype": "float32"}]}, "collective.manifest"),
    ],
)
async def test_bad_collective_updates_get_400_before_any_link(
    hf_server, collective: dict, param: str
) -> None:
    """Refused from the body alone: no link is joined (port 1 has no store)."""
    body = {
        "version": 5,
        "collective": {"host": "127.0.0.1", "port": 1, "manifest": [], **collective},
    }
    status, payload, headers = await post(hf_server.url, "/update_weights", body)
    assert (status, payload["error"]["param"]) == (400, param)
    assert headers["x-model-version"] != "5"


def perturbed_checkpoint(src: Path, dst: Path) -> Path:
    import torch
    from transformers import AutoModelForImageTextToText

    model = AutoModelForImageTextToText.from_pretrained(src)
    generator = torch.Generator().manual_seed(123)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn(param.shape, generator=generator) * 0.05)
    model.save_pretrained(dst)
    return dst


async def test_update_weights_changes_version_and_outputs(
    server_factory, tiny_model_dir: Path, tmp_path: Path
) -> None:
    server = server_factory()
    new_dir = perturbed_checkpoint(tiny_model_dir, tmp_path / "v1")
    client = InferenceClient(server.url, timeout_s=120)
    messages = [{"role": "user", "content": "Click OK."}]
    before = await client.chat(messages, temperature=0.0, max_tokens=6)

    status, payload, _ = await post(server.url, "/update_weights", {"version": 1, "path": "/nope"})
    assert status == 400 and payload["error"]["param"] == "path"
    assert await client.update_weights(1, str(new_dir)) == 1

    after = await client.chat(messages, temperature=0.0, max_tokens=6)
    await client.close()
    assert (before.model_version, after.model_version) == (0, 1)
    assert before.choices[0].logprobs != after.choices[0].logprobs


async def test_update_during_load_never_mixes_versions(
    server_factory, tiny_model_dir: Path, tmp_path: Path
) -> None:
    """Responses served while an update lands carry v0 or v1, and v1 ones are all after it."""
    server = server_factory()
    new_dir = perturbed_checkpoint(tiny_model_dir, tmp_path / "v1")
    client = InferenceClient(server.url, timeout_s=120)
    messages = [{"role": "user", "content": "Type hello."}]
    reference = await client.chat(messages, temperature=0.0, max_tokens=6)
    load = [
        asyncio.create_task(client.chat(messages, temperature=0.0, max_tokens=6)) for _ in range(6)
    ]
    await client.update_weights(1, str(new_dir))
    results = await asyncio.gather(*load)
    await client.close()
    for r in results:
        assert r.model_version in (0, 1)
        if r.model_version == 0:  # greedy on old weights: identical to the reference
            assert r.choices[0].logprobs == pytest.approx(reference.choices[0].logprobs, abs=1e-4)
