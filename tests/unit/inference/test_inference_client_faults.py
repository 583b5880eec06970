"""Bad answers from a model server become one typed error, never KeyError/IndexError."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest
from tests_support.fake_answers import BAD_MODES
from tests_support.fake_model_server import HANG, FakeModelConfig, FakeModelServer

from cua_rl.errors import ModelResponseError
from cua_rl.inference.base import InferenceUnavailable
from cua_rl.inference.client import InferenceClient
from cua_rl.inference.config import InferencePoolConfig
from cua_rl.inference.pool import InferencePool

MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.fixture
async def server() -> AsyncIterator[FakeModelServer]:
    srv = FakeModelServer(FakeModelConfig(version=1))
    await srv.start()
    yield srv
    await srv.stop()


@pytest.mark.parametrize("mode", sorted(BAD_MODES))
async def test_bad_answer_is_one_typed_error_and_not_retried(
    server: FakeModelServer, mode: str
) -> None:
    server.config.fault = mode
    pool = InferencePool([server.url], InferencePoolConfig(max_attempts=3))
    try:
        with pytest.raises(ModelResponseError) as caught:
            await pool.chat(MESSAGES, n=2, max_tokens=8)
    finally:
        await pool.close()
    message = str(caught.value)
    assert server.url in message and "/v1/chat/completions" in message and "expected" in message
    assert "\n" not in message
    assert server.requests == 1  # the same server would answer the same way
    # a bad answer is not a dead replica
    assert [r.url for r in pool.replicas.serving()] == [server.url]


async def test_good_answer_still_parses(server: FakeModelServer) -> None:
    client = InferenceClient(server.url)
    try:
        result = await client.chat(MESSAGES, n=2)
    finally:
        await client.close()
    assert [c.logprobs for c in result.choices] == [(-0.5, -1.5)] * 2
    assert result.model_version == 1


async def test_a_text_only_request_needs_no_logprobs(server: FakeModelServer) -> None:
    """A labelling judge reads answers only: it asks for no logprobs or token ids
    (fields a strict OpenAI API rejects) and takes choices without them."""
    server.config.fault = "missing_logprobs"
    client = InferenceClient(server.url)
    try:
        result = await client.chat(MESSAGES, n=2, logprobs=False)
        assert "logprobs" not in server.last_body and "return_token_ids" not in server.last_body
        assert [(c.logprobs, c.token_ids) for c in result.choices] == [((), ())] * 2
        assert result.choices[1].text
        with pytest.raises(ModelResponseError, match="choices.0.logprobs"):
            await client.chat(MESSAGES, n=2)  # by default a choice must carry them
        assert server.last_body["logprobs"] is True
    finally:
        await client.close()


async def test_bad_update_weights_answer(server: FakeModelServer) -> None:
    server.config.update = "garble"
    client = InferenceClient(server.url)
    try:
        with pytest.raises(ModelResponseError, match="update_weights.*version"):
            await client.update_weights(2, "/nowhere")
    finally:
        await client.close()


async def test_hanging_server_is_bounded_by_the_request_timeout(server: FakeModelServer) -> None:
    server.config.fault = HANG
    cfg = InferencePoolConfig(
        request_timeout_s=0.3,
        max_attempts=2,
        wait_for_replica_s=0.5,
        probe_interval_s=0.05,
        probe_timeout_s=0.1,
    )
    pool = InferencePool([server.url], cfg)
    started = time.monotonic()
    try:
        with pytest.raises(InferenceUnavailable):
            await pool.chat(MESSAGES)
    finally:
        await pool.close()
    assert time.monotonic() - started < 5.0
    assert server.requests == 2  # one per attempt, each cut at the request timeout


def test_pool_defaults_are_bounded() -> None:
    cfg = InferencePoolConfig()
    assert cfg.request_timeout_s * cfg.max_attempts <= 600
    assert InferencePool(["http://127.0.0.1:9"]).config == cfg
    assert InferencePool(["http://127.0.0.1:9"], timeout_s=3).config.request_timeout_s == 3
