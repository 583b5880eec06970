"""Weight sync from a learner's rank group: rank 0 broadcasts its gathered weights to a
real hf replica itself, and nothing of the weights comes back to the driver
(`train.sync.from_rank0`); with the switch off the driver receives the full weights
and sends them, as before."""

from __future__ import annotations

import base64
import io
import pickle
from pathlib import Path
from typing import Any

import pytest
import torch
from PIL import Image
from tests_support.servers import start_hf_server

from cua_rl.inference.client import InferenceClient
from cua_rl.learner.config import LearnerConfig, WeightSyncConfig
from cua_rl.learner.engines import build_engine
from cua_rl.learner.weight_sync import WeightSync

pytestmark = [pytest.mark.model]


def _perturbed(tiny_model_dir: Path, out: Path) -> Any:
    """A copy of the tiny model with every weight moved (what a learner trained)."""
    from transformers import AutoModelForImageTextToText, AutoProcessor

    torch.manual_seed(0)
    model = AutoModelForImageTextToText.from_pretrained(tiny_model_dir).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    model.save_pretrained(out)
    AutoProcessor.from_pretrained(tiny_model_dir).save_pretrained(out)
    return model


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


def _logprobs(model: Any, model_dir: Path, token_ids: list[int]) -> list[float]:
    """The sampled tokens' logprobs under `model` at temperature 1 (the server's)."""
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(model_dir)
    messages = _messages()
    image = Image.open(
        io.BytesIO(base64.b64decode(messages[0]["content"][0]["image_url"]["url"].split(",")[1]))
    ).convert("RGB")
    text = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    inputs = processor(text=[text], images=[image], return_tensors="pt")
    prompt = inputs["input_ids"].shape[1]
    ids = torch.cat([inputs["input_ids"], torch.tensor([token_ids])], dim=1)
    inputs["input_ids"], inputs["attention_mask"] = ids, torch.ones_like(ids)
    if "mm_token_type_ids" in inputs:
        inputs["mm_token_type_ids"] = torch.cat(
            [inputs["mm_token_type_ids"], torch.zeros(1, len(token_ids), dtype=torch.long)], 1
        )
    with torch.no_grad():
        logits = model(**inputs).logits[0, prompt - 1 : -1]
    return (
        torch.log_softmax(logits.float(), -1)
        .gather(-1, torch.tensor(token_ids)[:, None])[:, 0]
        .tolist()
    )


async def test_rank0_sends_the_weights_and_the_driver_never_holds_them(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    torch.set_num_threads(1)
    trained = _perturbed(tiny_model_dir, tmp_path / "trained")
    model_bytes = sum(p.numel() * p.element_size() for p in trained.parameters())
    cfg = LearnerConfig(engine={"type": "deepspeed", "zero_stage": 3}, ranks=2, rank_timeout_s=600)
    group = build_engine(cfg, tmp_path / "trained", name="policy", log_dir=tmp_path / "logs")
    to_driver: list[tuple[str, int]] = []
    call = group._ranks.call  # type: ignore[attr-defined]

    def recording(calls: Any, timeout_s: float, what: str) -> list[Any]:
        results = call(calls, timeout_s, what)
        to_driver.append((calls[0][0], max(len(pickle.dumps(r)) for r in results)))
        return results

    group._ranks.call = recording  # type: ignore[attr-defined]
    server = start_hf_server(tiny_model_dir, tmp_path)
    syncs = {
        flag: WeightSync(
            [server.url], WeightSyncConfig(timeout_s=120, from_rank0=flag), tmp_path / "exports"
        )
        for flag in (True, False)
    }
    try:
        for version, flag in ((3, True), (4, False)):
            to_driver.clear()
            assert await syncs[flag].push(group, version=version) == [version]
            client = InferenceClient(server.url, timeout_s=120)
            result = await client.chat(_messages(), temperature=1.0, max_tokens=6, seed=1)
            await client.close()
            assert result.model_version == version
            choice = result.choices[0]
            expected = _logprobs(trained, tmp_path / "trained", list(choice.token_ids))
            assert max(abs(a - b) for a, b in zip(choice.logprobs, expected, strict=True)) < 1e-4
            methods = {method for method, _ in to_driver}
            largest = max(size for _, size in to_driver)
            if flag:  # only the manifest came back to the driver: names, shapes, dtypes
                assert {"prepare_weights", "send_weights"} <= methods
                assert "parameters" not in methods
                assert largest < model_bytes / 20, (largest, model_bytes)
            else:  # from_rank0 off: the driver received the whole model and sent it
                assert "parameters" in methods and largest > model_bytes / 2
    finally:
        for sync in syncs.values():
            await sync.close()
        server.kill()
        group.close()
