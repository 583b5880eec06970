"""A supervised pool of two real hf replicas: one is SIGKILLed under load while the
learner pushes new weights. Requests route around it, the push does not fail, the
replica is restarted and serves only the new version; `/update_weights` wants the
run's credential."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import aiohttp
import pytest

from cua_rl.inference.base import ChatResult
from cua_rl.inference.config import InferencePoolConfig, ModelServersConfig, SupervisionConfig
from cua_rl.inference.launcher import replica_set
from cua_rl.inference.pool import InferencePool
from cua_rl.inference.replica_set import ReplicaState
from cua_rl.learner.config import WeightSyncConfig
from cua_rl.learner.weight_sync import WeightSync

pytestmark = pytest.mark.model

MESSAGES = [{"role": "user", "content": "Scroll down and click Save."}]


class ModelSource:
    """An HF model as a learner's weight source, at `version`."""

    def __init__(self, model, version: int) -> None:
        self.model = model
        self.version = version

    def named_parameters(self):
        return self.model.named_parameters()

    def export_weights(self, path: Path) -> Path:
        self.model.save_pretrained(str(path))
        return Path(path)


async def test_killed_replica_is_routed_around_restarted_and_caught_up(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    import torch
    from transformers import AutoModelForImageTextToText

    cfg = ModelServersConfig(
        replicas=2,
        requests=InferencePoolConfig(
            request_timeout_s=60, probe_interval_s=0.2, wait_for_replica_s=120
        ),
        supervision=SupervisionConfig(health_interval_s=0.5, restart_backoff_s=0.1),
    )
    model = AutoModelForImageTextToText.from_pretrained(tiny_model_dir).eval()
    with torch.no_grad():  # the learner "trained": version 1 differs from version 0
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    source = ModelSource(model, version=1)
    async with replica_set(
        cfg, name="policy", log_dir=tmp_path / "logs", tiny_dir=tiny_model_dir
    ) as replicas:
        pool = InferencePool(replicas, cfg.requests)
        sync = WeightSync(replicas, WeightSyncConfig(timeout_s=120), tmp_path / "exports")
        sync.attach(source, None)
        victim = replicas.replicas[replicas.urls[0]]
        # Each answer and when its request was sent: an answer the victim wrote just
        # before its kill can be read after it, so the time it arrived says nothing.
        results: list[tuple[ChatResult, float]] = []
        stop = asyncio.Event()

        async def load(worker: int) -> None:
            i = 0
            while not stop.is_set():
                sent = time.monotonic()
                result = await pool.chat(
                    MESSAGES, session_key=f"episode-{worker}-{i // 3}", max_tokens=8, seed=i
                )
                results.append((result, sent))
                i += 1

        async with asyncio.timeout(300), asyncio.TaskGroup() as tasks:
            for worker in range(3):
                tasks.create_task(load(worker))
            while {r.url for r, _ in results} != set(replicas.urls):  # noqa: ASYNC110
                await asyncio.sleep(0.05)  # both replicas serve the load
            assert victim.handle is not None
            os.killpg(victim.handle.proc.pid, signal.SIGKILL)  # type: ignore[attr-defined]
            killed_at = time.monotonic()
            assert await sync.push(source, 1) == [1]  # the survivor; no error for the dead one
            while not (  # noqa: ASYNC110
                victim.state is ReplicaState.HEALTHY
                and any(r.url == victim.url and t > killed_at for r, t in results)
            ):
                await asyncio.sleep(0.1)  # restarted, caught up and serving again
            stop.set()
        assert victim.restarts == 1 and victim.version == 1
        after = [r for r, t in results if t > killed_at and r.url == victim.url]
        assert after and {r.model_version for r in after} == {1}, [  # never the old weights
            (r.model_version, round(t - killed_at, 3)) for r, t in results if r.url == victim.url
        ]

        async with aiohttp.ClientSession() as session:
            body = {"version": 9, "path": str(tmp_path / "exports" / "v000001")}
            for headers in (
                {},
                {"Authorization": "Bearer wrong"},
                {"Authorization": "Bearer \u00e9"},
            ):
                async with session.post(
                    victim.url + "/update_weights", json=body, headers=headers
                ) as response:
                    assert response.status == 401, headers
        assert victim.client.token and victim.client.token not in " ".join(victim.handle.argv)  # type: ignore[union-attr]  # never in the process table
        await pool.close()
