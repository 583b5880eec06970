"""`cua-rl bench fleet --simulated` (cli/bench/fleet.py): asynchronous fleet vs a synchronous batch
baseline, on simulated desktops and model servers with the same capacities.

Both modes run the real Fleet, GroupScheduler, run_episode (real prompt
builders and parsers), StreamingJudge and a real SQLite run store; only time
is simulated (`simulated.py`, `latency.py`).

- async: N actors, judge streaming, a learner consuming finished groups in
  updates of N rollouts, each followed by a weight sync that takes the policy
  replicas out of routing one at a time (staggered, the default); run a second
  time with the sync pausing the whole policy pool (`async_global_pause_*`);
  samples older than `learner - eta` when consumed are dropped and counted.
- sync: batches of N rollouts (the same Fleet code, judge off); when the whole
  batch is done every step is judged, then trained on, then weights synced;
  run a second time with the judge streaming within each batch, as the real
  loop's `train.mode: sync` does (`sync_streaming_*`, `speedup_vs_sync_mode`).

Throughput counts steps whose episode finished and were judged, per simulated
second; async over a window after a warm-up, sync over whole cycles.

The plan and the simulated cluster each mode runs on are in fleet_cluster.py; this
module runs the modes on them and compares them.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from cua_rl.agent.context import history_line
from cua_rl.agent.images import encode_image
from cua_rl.bench.fleet_cluster import Cluster, make_plan
from cua_rl.rollout.fleet import GroupHandler
from cua_rl.rollout.latency import LatencyModel
from cua_rl.rollout.scheduler import GroupScheduler
from cua_rl.rollout.simulated import LoopLag
from cua_rl.types import GroupRecord


class AsyncLearner:
    """Consumes finished groups N rollouts at a time, dropping stale samples."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.queue: asyncio.Queue[GroupRecord] = asyncio.Queue()
        self.judged_steps = 0
        self.fresh_steps = 0
        self.stale_steps = 0
        self.updates = 0

    async def receive(self, finished: GroupRecord) -> None:
        self.judged_steps += sum(len(v) for v in finished.verdicts.values())
        self.queue.put_nowait(finished)

    async def run(self) -> None:
        gate = self.cluster.gate
        while True:
            batch = [await self.queue.get() for _ in range(self.cluster.plan.groups_per_update)]
            for finished in batch:
                for traj in finished.trajectories:
                    if gate.fresh(traj.policy_version_at_start):
                        self.fresh_steps += len(traj.steps)
                    else:
                        self.stale_steps += len(traj.steps)
            await self.cluster.train_and_sync(len(batch), pause_policy=True)
            self.updates += 1


async def run_async(cluster: Cluster) -> dict[str, Any]:
    plan, learner, lag = cluster.plan, AsyncLearner(cluster), LoopLag()
    fleet = cluster.fleet(
        GroupScheduler(cluster.tasks, plan.group_size), judged=True, on_group=learner.receive
    )
    tasks = [asyncio.create_task(c) for c in (fleet.run(), learner.run(), lag.run())]
    await cluster.clock.sleep(plan.warmup_s)
    _raise_failed(tasks)
    lag.lags.clear()
    wall0, cpu0 = time.perf_counter(), time.process_time()
    busy0, steps0 = cluster.desktops.busy_seconds(), learner.judged_steps
    calls0, work0 = cluster.policy.calls, cluster.desktops.work_s
    await cluster.clock.sleep(plan.window_s)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    busy, steps = cluster.desktops.busy_seconds() - busy0, learner.judged_steps - steps0
    executed, work = cluster.policy.calls - calls0, cluster.desktops.work_s - work0
    _raise_failed(tasks)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    lag_mean, lag_p99 = lag.summary_ms()
    consumed = learner.fresh_steps + learner.stale_steps
    return {
        "async_steps_per_s": steps / (wall / plan.scale),
        "desktop_utilization": busy / (plan.actors * wall),
        "desktop_work_share": work / (plan.actors * wall),
        "cpu_ms_per_step": 1000 * cpu / max(1, steps),
        "async_steps": steps,
        "cpu_ms_per_executed_step": 1000 * cpu / max(1, executed),
        "async_stale_fraction": learner.stale_steps / consumed if consumed else 0.0,
        "async_updates": learner.updates,
        "staleness_waits": cluster.gate.waits,
        "cpu_utilization": cpu / wall,
        "loop_lag_ms_mean": lag_mean,
        "loop_lag_ms_p99": lag_p99,
        "policy_queue_s_per_call": cluster.policy.queued_s
        / plan.scale
        / max(1, cluster.policy.calls),
    }


def _raise_failed(tasks: list[asyncio.Task[Any]]) -> None:
    """A component that died would silently stop the clock's work: fail loudly."""
    for task in tasks:
        if task.done() and not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]  # checked not None in the same condition


async def judge_batch(cluster: Cluster, groups: list[GroupRecord]) -> int:
    """Judge every step of a finished batch (the sync baseline's scoring phase):
    the same prompts the streaming judge builds, the same PRM pool."""
    urls: dict[str, str] = {}

    def url(name: str) -> str:
        if name not in urls:
            data = cluster.store.screenshot_path(name).read_bytes()
            urls[name] = encode_image(
                data, min_pixels=cluster.episode.min_pixels, max_pixels=cluster.episode.max_pixels
            )
        return urls[name]

    tids = []
    for finished in groups:
        for traj in finished.trajectories:
            history: list[str] = []
            for step in traj.steps:
                cluster.judge.submit(
                    traj.id,
                    finished.variant,
                    step,
                    list(history),
                    url(step.screenshot_before),
                    url(step.screenshot_after),
                )
                history.append(history_line(step))
            tids.append(traj.id)
    verdicts = await asyncio.gather(*(cluster.judge.collect(t) for t in tids))
    return sum(len(v) for v in verdicts)


def _collect(into: list[GroupRecord]) -> GroupHandler:
    async def keep(finished: GroupRecord) -> None:
        into.append(finished)

    return keep


async def run_sync(
    cluster: Cluster, budget_s: float, *, streaming: bool = False, prefix: str = "sync"
) -> dict[str, Any]:
    """Batches of N rollouts, each trained on and synced before the next. `streaming`:
    the judge scores steps while the batch runs, as `train.mode: sync` of the real
    loop does; otherwise the whole batch is judged after its last rollout (the
    classic batch pipeline)."""
    plan, clock = cluster.plan, cluster.clock
    phases = dict.fromkeys(("generate", "judge", "train", "weight_sync"), 0.0)
    wall0, busy0 = time.perf_counter(), cluster.desktops.busy_seconds()
    work0 = cluster.desktops.work_s
    steps = cycles = 0
    while cycles == 0 or (time.perf_counter() - wall0) / plan.scale < budget_s:
        groups: list[GroupRecord] = []
        t0 = time.perf_counter()
        scheduler = GroupScheduler(
            cluster.tasks, plan.group_size, max_groups=plan.groups_per_update
        )
        await cluster.fleet(scheduler, judged=streaming, on_group=_collect(groups)).run()
        t1 = time.perf_counter()
        if streaming:  # every verdict is in: a group is emitted only with all of them
            steps += sum(len(v) for g in groups for v in g.verdicts.values())
        else:
            steps += await judge_batch(cluster, groups)
        t2 = time.perf_counter()
        sync_s = await cluster.train_and_sync(len(groups), pause_policy=False)
        t3 = time.perf_counter()
        phases["generate"] += t1 - t0
        phases["judge"] += t2 - t1
        phases["weight_sync"] += sync_s * clock.scale
        phases["train"] += t3 - t2 - sync_s * clock.scale
        cycles += 1
    wall = time.perf_counter() - wall0
    out: dict[str, Any] = {
        "steps_per_s": steps / (wall / plan.scale),
        "desktop_utilization": (cluster.desktops.busy_seconds() - busy0) / (plan.actors * wall),
        "desktop_work_share": (cluster.desktops.work_s - work0) / (plan.actors * wall),
        "steps": steps,
        "cycles": cycles,
    }
    out.update({f"{name}_share": s / wall for name, s in phases.items()})
    return {f"{prefix}_{key}": value for key, value in out.items()}


async def bench(
    model: LatencyModel,
    actors: int,
    *,
    group_size: int = 8,
    eta: int = 2,
    duration_s: float = 60.0,
    seed: int = 0,
    run_dir: Path | None = None,
) -> dict[str, Any]:
    """Both modes, one after the other, each in its own run store."""
    plan = make_plan(model, actors, group_size, eta, duration_s)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as tmp:
        root = run_dir or Path(tmp)
        result: dict[str, Any] = {}
        for mode in ("async", "async_global_pause", "sync", "sync_streaming"):
            cluster = Cluster(
                model, plan, root / mode, seed, staggered=mode != "async_global_pause"
            )
            try:
                if mode == "async":
                    result.update(await run_async(cluster))
                elif mode.startswith("sync"):
                    result.update(
                        await run_sync(
                            cluster, plan.window_s, streaming=mode == "sync_streaming", prefix=mode
                        )
                    )
                else:  # the same async run with the old global pause: throughput only
                    paused = await run_async(cluster)
                    result["async_global_pause_steps_per_s"] = paused["async_steps_per_s"]
            finally:
                await cluster.close()
    cap = model.capacity
    # A loop that wakes sleepers late stretches every simulated latency: past 10 %
    # of a policy call the figures describe this host, not the modelled cluster.
    host_bound = result["loop_lag_ms_p99"] / 1000 > 0.1 * model.policy_s.median_s * plan.scale
    return {
        "actors": actors,
        "speedup": result["async_steps_per_s"] / result["sync_steps_per_s"],
        "speedup_global_pause": result["async_global_pause_steps_per_s"]
        / result["sync_steps_per_s"],
        # against the real loop's `train.mode: sync`, whose judge streams within a batch
        "speedup_vs_sync_mode": result["async_steps_per_s"] / result["sync_streaming_steps_per_s"],
        "host_bound": host_bound,
        **result,
        "group_size": group_size,
        "eta": eta,
        "time_scale": plan.scale,
        "policy_replicas": cap.policy_replicas(actors),
        "prm_replicas": cap.prm_replicas(actors),
        "learner_nodes": cap.learner_nodes(actors),
        "wall_s": time.perf_counter() - started,
    }
