"""Weight sync from an in-process learner model to real hf server replicas."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import pytest
import torch
from PIL import Image
from tests_support.servers import start_hf_server

from cua_rl.inference.client import InferenceClient
from cua_rl.learner.config import WeightSyncConfig
from cua_rl.learner.weight_sync import WeightSync

pytestmark = pytest.mark.model


def _messages() -> list[dict]:
    buf = io.BytesIO()
    Image.new("RGB", (96, 64), "teal").save(buf, format="PNG")
    url = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
    return [
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": url}},
                {"type": "text", "text": "What is on screen?"},
            ],
        }
    ]


def _direct_logprobs(model, processor, messages, token_ids, temperature: float) -> list[float]:
    image = Image.open(
        io.BytesIO(base64.b64decode(messages[0]["content"][0]["image_url"]["url"].split(",")[1]))
    ).convert("RGB")
    text = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    inputs = processor(text=[text], images=[image], return_tensors="pt")
    prompt_len = inputs["input_ids"].shape[1]
    ids = torch.cat([inputs["input_ids"], torch.tensor([token_ids])], dim=1)
    inputs["input_ids"] = ids
    inputs["attention_mask"] = torch.ones_like(ids)
    if "mm_token_type_ids" in inputs:
        inputs["mm_token_type_ids"] = torch.cat(
            [inputs["mm_token_type_ids"], torch.zeros(1, len(token_ids), dtype=torch.long)], 1
        )
    with torch.no_grad():
        logits = model(**inputs).logits[0, prompt_len - 1 : -1] / temperature
    return (
        torch.log_softmax(logits.float(), -1)
        .gather(-1, torch.tensor(token_ids)[:, None])[:, 0]
        .tolist()
    )


class ModelSource:
    """An HF model as a weight source (what a TrainEngine offers)."""

    def __init__(self, model) -> None:
        self.model = model

    def named_parameters(self):
        return self.model.named_parameters()

    def export_weights(self, path: Path) -> Path:
        self.model.save_pretrained(str(path))
        return Path(path)


@pytest.mark.parametrize("mode", ["collective", "checkpoint"])
async def test_sync_moves_learner_weights_to_every_replica(
    mode: str, tiny_model_dir: Path, tmp_path: Path
) -> None:
    from transformers import AutoModelForImageTextToText, AutoProcessor

    torch.manual_seed(0)
    model = AutoModelForImageTextToText.from_pretrained(tiny_model_dir).eval()
    with torch.no_grad():  # the learner "trained": every weight moved
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    processor = AutoProcessor.from_pretrained(tiny_model_dir)
    servers = [start_hf_server(tiny_model_dir, tmp_path) for _ in range(2)]
    sync = WeightSync(
        [s.url for s in servers], WeightSyncConfig(mode=mode, timeout_s=120), tmp_path / "exports"
    )
    try:
        assert await sync.push(ModelSource(model), version=7) == [7, 7]
        for server in servers:
            client = InferenceClient(server.url, timeout_s=120)
            result = await client.chat(_messages(), temperature=0.9, max_tokens=6, seed=1)
            await client.close()
            assert result.model_version == 7
            choice = result.choices[0]
            expected = _direct_logprobs(model, processor, _messages(), list(choice.token_ids), 0.9)
            assert max(abs(a - b) for a, b in zip(choice.logprobs, expected, strict=True)) < 1e-4
    finally:
        await sync.close()
        for server in servers:
            server.kill()


@pytest.mark.parametrize("staggered", [True, False])
async def test_staggered_sync_on_real_hf_replicas_routes_nothing_to_the_one_updating(
    staggered: bool, tiny_model_dir: Path, tmp_path: Path
) -> None:
    """`cua-rl bench sync`'s run, small: 2 real hf replicas, clients without pause,
    collective syncs. Every request is answered (a lost one raises); with the switch
    on none started on a replica under update, with it off some did."""
    from cua_rl.bench.sync import run_bench_sync

    result = await run_bench_sync(
        tiny_model_dir, tmp_path, replicas=2, syncs=3, clients=4, staggered=staggered
    )
    assert result["requests"] > 0
    if staggered:
        assert result["routed_to_updating"] == 0
    else:
        assert result["routed_to_updating"] > 0
