"""A Ray replica actor's server is SIGKILLed: the driver's set (built by `ray.train`
as in a `ray.inference: ray` run, on a real local Ray cluster and the real hf server
on the tiny model) takes it out, restarts it through the actor on the same URL,
catches it up to the pool's weight version and routes to it again; at the end no
server process is left."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from cua_rl.config import RunConfig, load_config
from cua_rl.inference.pool import InferencePool
from cua_rl.inference.replica_set import Replica, ReplicaState
from cua_rl.runtime.ray.train import replicas

pytestmark = pytest.mark.model

MESSAGES = [{"role": "user", "content": "Scroll down and click Save."}]


def server_pids(log: Path) -> list[int]:
    """Processes writing to the replica's log: its server, whichever start it is."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.readlink(entry / "fd" / "1") == str(log):
                    pids.append(int(entry.name))
            except OSError:  # gone, or not ours
                continue
    return pids


async def until(condition: Callable[[], bool], what: str, timeout_s: float) -> None:
    """Poll `condition` until it holds; fail naming `what` after `timeout_s`."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout_s
    while not condition():
        assert loop.time() < end, f"not within {timeout_s:g} s: {what}"
        await asyncio.sleep(0.1)


async def test_a_killed_replica_actor_server_is_restarted_caught_up_and_routed_to(
    primed_tiny_model_dir: Path, tmp_path: Path
) -> None:
    ray = pytest.importorskip("ray")
    cfg = load_config(
        RunConfig,
        preset="quickstart",
        overrides=[
            "runtime=ray",
            "ray.inference=ray",
            "ray.replica_bind_host=127.0.0.1",
            f"tiny_model_dir={primed_tiny_model_dir}",
            "policy.replicas=1",
            "policy.supervision.health_interval_s=0.5",
            "policy.supervision.restart_backoff_s=0.1",
            "policy.requests.probe_interval_s=0.2",
            "policy.requests.wait_for_replica_s=120",
        ],
    )
    run_dir = tmp_path / "run"
    log = run_dir / "logs" / "policy-0.log"
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1")
    try:
        async with replicas(cfg, cfg.policy, "policy", run_dir, 0) as pool_set:
            pool = InferencePool(pool_set, cfg.policy.requests)
            [url] = pool_set.urls
            replica = pool_set.replicas[url]
            assert replica.handle is not None  # supervised, not merely probed
            [first] = server_pids(log)
            pushed: list[int] = []

            async def catch_up(target: Replica) -> int:
                """The weight sync's hook, pushing a checkpoint (the same weights) as
                the pool's version 1."""
                version = await target.client.update_weights(1, str(primed_tiny_model_dir))
                pushed.append(version)
                return version

            pool_set.catch_up = catch_up
            pool_set.target_version = 1  # the learner moved on while it was serving 0
            os.kill(first, signal.SIGKILL)

            await until(
                lambda: replica.state is not ReplicaState.HEALTHY,
                "the set takes the killed replica out",
                30,
            )
            await until(
                lambda: replica.state is ReplicaState.HEALTHY,
                "the replica is restarted and serves again",
                90,
            )
            assert replica.restarts == 1 and pool_set.urls == [url]
            assert pushed == [1] and replica.version == 1  # caught up before serving
            [second] = server_pids(log)
            assert second != first
            result = await pool.chat(MESSAGES, session_key="after-restart", max_tokens=4, seed=0)
            assert result.choices and replica.state is ReplicaState.HEALTHY
            info = await replica.client.health_info()
            assert info is not None and info["version"] == 1
    finally:
        ray.shutdown()
    await until(lambda: server_pids(log) == [], "no replica server is left", 30)
