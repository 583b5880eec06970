"""Weight sync into the real vLLM replica, by checkpoint path and by gloo broadcast,
through the learner's WeightSync (the same client calls as for hf replicas).

Each update must change what is served and the served version, and afterwards vLLM's
logprobs must be the learner model's (so no cache built with the old weights
survived). The session's replica gets the tiny checkpoint back at the end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests_support.learner_data import prompts
from tests_support.vllm import chat

torch = pytest.importorskip("torch")

from cua_rl.inference.client import InferenceClient  # noqa: E402
from cua_rl.learner.batching import build_micro_batches, encode_sample  # noqa: E402
from cua_rl.learner.config import LearnerConfig, WeightSyncConfig  # noqa: E402
from cua_rl.learner.engine_torch import TorchTrainEngine  # noqa: E402
from cua_rl.learner.logprobs import batch_logprobs  # noqa: E402
from cua_rl.learner.weight_sync import WeightSync  # noqa: E402
from cua_rl.types import StepSample  # noqa: E402

pytestmark = pytest.mark.model
TEMPERATURE = 0.8


def served(url: str) -> tuple[list[StepSample], int]:
    """Greedy-free samples of every prompt (fixed seed) and the version that served them."""
    samples, versions = [], set()
    for i, messages in enumerate(prompts()):
        payload, version = chat(
            url,
            {"messages": messages, "n": 2, "seed": i, "temperature": TEMPERATURE, "max_tokens": 12},
        )
        versions.add(version)
        samples += [
            StepSample(
                tuple(messages),
                tuple(c["token_ids"]),
                tuple(e["logprob"] for e in c["logprobs"]["content"]),
                version,
                1.0,
            )
            for c in payload["choices"]
        ]
    assert len(versions) == 1
    return samples, versions.pop()


def max_diff(engine: TorchTrainEngine, samples: list[StepSample]) -> float:
    encoded = [encode_sample(engine.processor, s) for s in samples]
    batches = build_micro_batches(encoded, 1, engine.processor.tokenizer.pad_token_id)
    return max(
        float((r - b.behavior_logprobs).abs().max())
        for r, b in zip(batch_logprobs(engine.model, batches, TEMPERATURE), batches, strict=True)
    )


@pytest.mark.parametrize("mode", ["collective", "checkpoint"])
async def test_update_changes_outputs_and_version(
    mode: str, vllm_server: Any, tiny_model_dir: Path, tmp_path: Path
) -> None:
    torch.set_num_threads(1)
    engine = TorchTrainEngine(LearnerConfig(lr=1e-3, temperature=TEMPERATURE), tiny_model_dir)
    before, old_version = served(vllm_server.url)
    with torch.no_grad():  # the learner "trained": every weight moved
        for _, p in engine.named_parameters():
            p.add_(torch.randn_like(p) * 0.05)
    version = old_version + 1
    # 1 MiB buckets: the tiny model's 7 MiB arrive in several, each split back into
    # tensors by the vLLM side (at the default size it would be one)
    sync = WeightSync(
        [vllm_server.url],
        WeightSyncConfig(mode=mode, timeout_s=120, bucket_mb=1),
        tmp_path / "exports",
        token=vllm_server.token,
    )
    try:
        assert await sync.push(engine, version) == [version]
        after, served_version = served(vllm_server.url)
        assert served_version == version
        assert {(s.response_token_ids, s.behavior_logprobs) for s in after} != {
            (s.response_token_ids, s.behavior_logprobs) for s in before
        }
        diff = max_diff(engine, after)
        print(f"{mode}: after the update max |vLLM - learner| = {diff:.2e}")
        assert diff <= 1e-3
    finally:
        await sync.close()
        # the tiny checkpoint back
        client = InferenceClient(vllm_server.url, timeout_s=120, token=vllm_server.token)
        await client.update_weights(version + 1, str(tiny_model_dir))
        await client.close()


async def test_update_without_the_credential_is_401(vllm_server: Any, tmp_path: Path) -> None:
    from cua_rl.inference.base import InferenceRequestError

    for token in (None, "wrong"):
        client = InferenceClient(vllm_server.url, timeout_s=120, token=token)
        try:
            with pytest.raises(InferenceRequestError) as refused:
                await client.update_weights(99, str(tmp_path))
            assert refused.value.status == 401
        finally:
            await client.close()


async def test_bad_update_is_refused_and_the_replica_keeps_serving(
    vllm_server: Any, tmp_path: Path
) -> None:
    from cua_rl.inference.base import InferenceRequestError

    client = InferenceClient(vllm_server.url, timeout_s=120, token=vllm_server.token)
    try:
        with pytest.raises(InferenceRequestError) as refused:
            await client.update_weights(99, str(tmp_path / "no-checkpoint"))
        assert refused.value.param == "path"
        _, version = chat(vllm_server.url, {"messages": prompts()[1], "max_tokens": 2})
        assert version != 99
    finally:
        await client.close()
