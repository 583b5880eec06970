"""The soak's `malformed_answer` fault through the fault proxy in forward mode, with
real servers on 127.0.0.1: the run's model clients reach their own replicas through
it (`CUA_RL_MODEL_PROXY`), one replica's next chat answers come back malformed while
the other's do not, /health stays direct, and the fault recovers once those answers
were served, the replica answered well again and the run made progress."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from tests_support.fake_model_server import FakeModelServer
from yarl import URL

from cua_rl.bench.faults.proxy import FaultProxy
from cua_rl.bench.soak.chaos import Chaos
from cua_rl.bench.soak.malformed import ANSWERS, MALFORMED, MalformedAnswers
from cua_rl.errors import ConfigError, ModelResponseError
from cua_rl.inference.client import PROXY_ENV, InferenceClient, model_proxy

MESSAGES = [{"role": "user", "content": "hi"}]


class ServingRun:
    """What the chaos uses of a `RunProcess`, over two real replicas (policy, prm)."""

    def __init__(self, policy: int, prm: int) -> None:
        self.pid = 1
        self.seen = {
            10: f"python -m cua_rl.cli serve --engine hf --port {policy}",
            11: f"python -m cua_rl.cli serve --engine hf --port {prm}",
        }

    def replica_pids(self, role: str) -> list[int]:
        return [10] if role == "policy" else [11]


@pytest.fixture
async def servers() -> AsyncIterator[tuple[FakeModelServer, FakeModelServer, FaultProxy]]:
    policy, prm = FakeModelServer(), FakeModelServer()
    await policy.start()
    await prm.start()
    proxy = FaultProxy().start()
    yield policy, prm, proxy
    proxy.stop()
    await policy.stop()
    await prm.stop()


async def test_a_replica_answers_malformed_through_the_forward_proxy(
    servers: tuple[FakeModelServer, FakeModelServer, FaultProxy], monkeypatch: pytest.MonkeyPatch
) -> None:
    policy, prm, proxy = servers
    monkeypatch.setenv(PROXY_ENV, proxy.url)
    to_policy, to_prm = InferenceClient(policy.url), InferenceClient(prm.url)
    try:
        assert await to_policy.health() and proxy.forwarded == 0  # probes stay direct
        await to_policy.chat(MESSAGES)
        assert proxy.forwarded == 1 and policy.requests == 1
        proxy.arm("malformed", 2, ports=[URL(policy.url).port])
        for _ in range(2):
            with pytest.raises(ModelResponseError, match="choices"):
                await to_policy.chat(MESSAGES)
            await to_prm.chat(MESSAGES)  # the other replica is untouched
        assert policy.requests == 1 and prm.requests == 2 and proxy.served_all
        assert proxy.first_good_after is None
        await to_policy.chat(MESSAGES)
        assert proxy.first_good_after is not None and policy.requests == 2
    finally:
        await to_policy.close()
        await to_prm.close()


def test_the_proxy_env_must_name_loopback() -> None:
    assert model_proxy({}) is None
    assert model_proxy({PROXY_ENV: "http://127.0.0.1:8123"}) == "http://127.0.0.1:8123"
    for bad in ("http://10.0.0.5:8123", "https://127.0.0.1:1", "127.0.0.1:80", "http://x:1"):
        with pytest.raises(ConfigError, match=PROXY_ENV):
            model_proxy({PROXY_ENV: bad})


async def test_the_proxy_forwards_to_loopback_only(
    servers: tuple[FakeModelServer, FakeModelServer, FaultProxy], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, _, proxy = servers
    monkeypatch.setenv(PROXY_ENV, proxy.url)
    client = InferenceClient("http://192.0.2.1:9", timeout_s=5.0)
    try:
        with pytest.raises(Exception, match="403"):
            await client.chat(MESSAGES)
    finally:
        await client.close()
    assert proxy.forwarded == 0


async def test_the_chaos_injects_malformed_answers_and_waits_for_their_recovery(
    servers: tuple[FakeModelServer, FakeModelServer, FaultProxy], monkeypatch: pytest.MonkeyPatch
) -> None:
    policy, prm, proxy = servers
    monkeypatch.setenv(PROXY_ENV, proxy.url)
    run = ServingRun(URL(policy.url).port, URL(prm.url).port)
    chaos = Chaos(
        run,
        60.0,
        0,
        [MALFORMED],
        log=lambda _: None,  # type: ignore[arg-type]
        healthy=lambda port: True,
        malformed=MalformedAnswers(proxy),
    )
    for t in range(10):  # one fault a second on average
        chaos.tick(float(t), 0.0, inject=True)
    [fault] = chaos.injections
    victim = policy if fault.extra["role"] == "policy" else prm
    assert fault.extra["port"] == URL(victim.url).port and fault.port is None
    client = InferenceClient(victim.url)
    try:
        for _ in range(ANSWERS):
            with pytest.raises(ModelResponseError):
                await client.chat(MESSAGES)
        chaos.tick(20.0, 19.0, inject=False)  # progress, but no good answer yet
        assert fault.recovered is None
        await client.chat(MESSAGES)
    finally:
        await client.close()
    chaos.tick(21.0, fault.t - 1.0, inject=False)  # answered well, no progress since
    assert fault.recovered is None
    chaos.tick(22.0, fault.t + 1.0, inject=False)
    assert fault.recovered and fault.recover_s == 22.0 - fault.t


def test_the_kind_needs_a_proxy() -> None:
    with pytest.raises(ValueError, match="unknown fault kind"):
        Chaos(ServingRun(1, 2), 1.0, 0, [MALFORMED], log=lambda _: None)  # type: ignore[arg-type]
