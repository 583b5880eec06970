"""The learner rebuilds exactly what a real hf server sampled from.

Same prompt ids, and recomputed logprobs equal to the server's behavior logprobs
(within 1e-4) when the weights are equal, before and after a weight update with
the learner's own export.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests_support.learner_data import prompt_token_ids, prompts, sample_from_server
from tests_support.servers import start_hf_server

torch = pytest.importorskip("torch")

from cua_rl.learner.batching import build_micro_batches, encode_sample  # noqa: E402
from cua_rl.learner.config import LearnerConfig  # noqa: E402
from cua_rl.learner.engine_torch import TorchTrainEngine  # noqa: E402
from cua_rl.learner.logprobs import batch_logprobs  # noqa: E402
from cua_rl.types import StepSample  # noqa: E402

pytestmark = pytest.mark.model
TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def server(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    process = start_hf_server(tiny_model_dir, tmp_path_factory.mktemp("learner-logs"))
    yield process
    process.kill()


@pytest.fixture(scope="module")
def engine(tiny_model_dir: Path) -> TorchTrainEngine:
    torch.set_num_threads(1)
    return TorchTrainEngine(LearnerConfig(lr=1e-3, temperature=0.7), tiny_model_dir)


def max_logprob_diff(
    engine: TorchTrainEngine, samples: list[StepSample], temperature: float, micro_batch_tokens: int
) -> float:
    encoded = [encode_sample(engine.processor, s) for s in samples]
    pad = engine.processor.tokenizer.pad_token_id
    batches = build_micro_batches(encoded, micro_batch_tokens, pad)
    recomputed = batch_logprobs(engine.model, batches, temperature)
    return max(
        float((r - b.behavior_logprobs).abs().max())
        for r, b in zip(recomputed, batches, strict=True)
    )


def test_prompt_ids_are_the_servers(server: Any, engine: TorchTrainEngine) -> None:
    for messages in prompts():
        sample = StepSample(tuple(messages), (1,), (0.0,), 0, 0.0)
        encoded = encode_sample(engine.processor, sample)
        assert encoded.input_ids[: encoded.prompt_len].tolist() == prompt_token_ids(
            server.url, messages
        )


@pytest.mark.parametrize("temperature", [0.7, 0.0])
@pytest.mark.parametrize("micro_batch_tokens", [1, 100_000], ids=["one-per-batch", "padded"])
def test_recomputed_logprobs_match_behavior_logprobs(
    server: Any, engine: TorchTrainEngine, temperature: float, micro_batch_tokens: int
) -> None:
    samples = [
        s
        for i, m in enumerate(prompts())
        for s in sample_from_server(server.url, m, n=2, temperature=temperature, seed=i)
    ]
    diff = max_logprob_diff(engine, samples, temperature, micro_batch_tokens)
    print(f"T={temperature} micro_batch_tokens={micro_batch_tokens}: max |diff| = {diff:.2e}")
    assert diff < TOLERANCE


def test_exported_weights_serve_the_same_logprobs_after_update(
    server: Any, engine: TorchTrainEngine, tmp_path: Path
) -> None:
    from transformers import AutoModelForImageTextToText

    before = [
        s
        for m in prompts()
        for s in sample_from_server(server.url, m, n=2, temperature=0.7, seed=5)
    ]
    metrics = engine.train_step(before)
    assert metrics["ratio"] == pytest.approx(1.0, abs=1e-5)  # prox == current before the update
    assert metrics["is_weight_raw"] == pytest.approx(1.0, abs=1e-3)  # server == learner weights
    export = engine.export_weights(tmp_path / "export")
    reloaded = dict(AutoModelForImageTextToText.from_pretrained(str(export)).named_parameters())
    for name, tensor in engine.named_parameters():
        assert torch.equal(reloaded[name], tensor), name

    body = json.dumps({"version": engine.version, "path": str(export)}).encode()
    request = urllib.request.Request(
        server.url + "/update_weights", body, {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        assert json.loads(response.read())["version"] == 1

    after = [
        s
        for m in prompts()
        for s in sample_from_server(server.url, m, n=2, temperature=0.7, seed=5)
    ]
    assert {s.version for s in after} == {1}
    assert max_logprob_diff(engine, after, 0.7, 100_000) < TOLERANCE
    old = {(s.response_token_ids, s.behavior_logprobs) for s in before}
    assert old != {(s.response_token_ids, s.behavior_logprobs) for s in after}
