"""vLLM serves an exported run checkpoint: `cua-rl export model`'s folder, loaded by
path into the session's vLLM replica, answers a fixed prompt with the same greedy
tokens as the learner's own model. The replica gets the tiny checkpoint back."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from tests_support.learner_runs import train_and_checkpoint_async, write_run_config
from tests_support.vllm import chat

torch = pytest.importorskip("torch")

from cua_rl.export.model import export_model  # noqa: E402
from cua_rl.inference.client import InferenceClient  # noqa: E402
from cua_rl.learner.config import LearnerConfig  # noqa: E402
from cua_rl.learner.engine_torch import TorchTrainEngine  # noqa: E402

pytestmark = pytest.mark.model
MESSAGES = [{"role": "user", "content": "Open the file menu and save the report."}]


async def test_vllm_serves_the_export_with_the_learners_greedy_tokens(
    vllm_server: Any, tiny_model_dir: Path, tmp_path: Path
) -> None:
    torch.set_num_threads(1)
    run = tmp_path / "run"
    write_run_config(run, tiny_model_dir)
    engine = TorchTrainEngine(LearnerConfig(lr=1e-3), tiny_model_dir)
    await train_and_checkpoint_async(run, engine, "policy", updates=2)
    info = await asyncio.to_thread(export_model, run, "policy", tmp_path / "export")

    client = InferenceClient(vllm_server.url, timeout_s=120, token=vllm_server.token)
    _, version = chat(vllm_server.url, {"messages": MESSAGES, "max_tokens": 1})
    try:
        assert await client.update_weights(version + 1, info["out"], 120) == version + 1
        payload, served = chat(
            vllm_server.url, {"messages": MESSAGES, "temperature": 0, "max_tokens": 12}
        )
        assert served == version + 1
        prompt = payload["prompt_token_ids"]
        tokens = payload["choices"][0]["token_ids"]
        with torch.no_grad():
            learner = engine.model.generate(
                input_ids=torch.tensor([prompt]), do_sample=False, max_new_tokens=12
            )[0, len(prompt) :].tolist()
        assert tokens == learner[: len(tokens)] and len(tokens) >= 1
    finally:  # the tiny checkpoint back
        await client.update_weights(version + 2, str(tiny_model_dir), 120)
        await client.close()
