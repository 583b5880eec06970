"""One learner (policy or reward model) as an asyncio service.

It consumes whole task groups: an RL step is `tasks_per_update` sampled groups
(paper: 12 tasks x 8 rollouts) of original or accepted tasks, all their steps
(policy) or votes (PRM), split into mini-batches by the engine. A group counts
towards its step whether or not it has samples (all advantages zero, or, for the
reward model, a task outside the band), so an update is made of exactly the
tasks sampled for it. A step with no sample at all makes no update: the weights
and the version stay (`<role>_steps_empty`); the version, and so the staleness
bound eta, counts updates. Invariants:
- freshness is decided once per group, when it is submitted: the group is fresh
  iff its oldest behaviour version (replayed trajectories left out) is at least
  `learner version - eta`; a stale group's samples are all dropped and counted
  (`<role>_stale_dropped`), it still fills its place in the step. A group is
  never trained in part;
- a kept sample is at most `eta + queue_updates` versions old when trained (the
  queue bound);
- a follower (`leader`: the reward model follows the policy) takes step k only
  once its leader has taken step k, so both train on the same groups, step for
  step, and the follower stops where the leader stopped;
- a step cut short by the end of the run is not trained; every submitted sample
  is counted once (`<role>_samples_collected`) and ends as used, stale, unused at
  the end, or unused because the engine left it out of an update as a low-entropy
  step (`entropy_top_fraction`) (`<role>_samples_used`, `<role>_stale_dropped`,
  `<role>_unused_at_end`, `<role>_unused_low_entropy`).

Updates are counted from the checkpointed version, so a run resumed after a
crash never counts an update twice or misses one: the store's `<role>_updates`
equals the version of the last checkpoint. Order after each update: checkpoint
(model, optimizer, versions) -> counters -> weight sync -> version gate. A crash
between any two of these resumes from the checkpoint with at most the sync
repeated, which is idempotent.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from cua_rl import spans
from cua_rl.learner.base import TrainEngine
from cua_rl.learner.checkpoint_keep import Keeping, prune
from cua_rl.learner.config import LearnerLoopConfig
from cua_rl.learner.weight_sync import WeightSync
from cua_rl.staleness_gate import Gate
from cua_rl.store.async_run_store import AsyncRunStore
from cua_rl.store.schema import UPDATE
from cua_rl.types import StepSample

Role = Literal["policy", "prm"]
MetricsHook = Callable[[str, dict[str, float], int], None]

__all__ = ["LearnerLoopConfig", "LearnerService", "latest_checkpoint"]


@dataclass(frozen=True, slots=True)
class _QueuedGroup:
    group_id: str
    samples: tuple[StepSample, ...]


class LearnerService:
    def __init__(
        self,
        role: Role,
        engine: TrainEngine,
        store: AsyncRunStore,
        cfg: LearnerLoopConfig,
        *,
        checkpoint_dir: Path,
        tasks_per_update: int = 1,
        sync: WeightSync | None = None,
        gate: Gate | None = None,
        eta: int = 2,
        on_metrics: MetricsHook | None = None,
        leader: LearnerService | None = None,
        keeping: Keeping | None = None,
    ) -> None:
        if tasks_per_update < 1:
            raise ValueError(f"tasks_per_update must be >= 1, got {tasks_per_update}")
        self.role = role
        self.engine = engine
        self.store = store
        self.cfg = cfg
        self.tasks_per_update = tasks_per_update
        self.checkpoint_dir = checkpoint_dir
        self.keeping = keeping or Keeping()
        """Which checkpoints stay after each update (`checkpoint_keep`)."""
        self.sync = sync
        self.gate = gate
        self.eta = eta
        self.on_metrics = on_metrics
        # Unbounded underneath; `submit` enforces the bound so that stopping can
        # release every waiting producer at once.
        self._queue: asyncio.Queue[_QueuedGroup | None] = asyncio.Queue()
        self._space = asyncio.Condition()
        self._thread = ThreadPoolExecutor(1, thread_name_prefix=f"learner-{role}")
        if sync is not None:  # catch-up exports run between training steps, on this thread
            sync.attach(engine, self._thread)
        self.samples_collected = 0
        self.samples_used = 0
        self.stale_dropped = 0
        self.unused_at_end = 0
        self.unused_low_entropy = 0
        """Samples of updates that the engine did not train: not among the update's
        high-entropy steps (`entropy_top_fraction`; 0 when it is off)."""
        self.steps = 0
        """RL steps taken by this service, with or without an update (from 0 after a
        resume; the store's `<role>_steps` adds up across resumes)."""
        self.steps_empty = 0
        self.steps_done = 0
        """RL steps whose update, checkpoint and weight sync (if any) have finished:
        what a synchronous batch waits for (`runtime/sync_batches.py`)."""
        self.groups_submitted = 0
        self.leader = leader
        self._stale_since_update = 0
        self._stopped = False
        self._stepped = asyncio.Condition()

    @property
    def version(self) -> int:
        return self.engine.version

    @property
    def queue_bound(self) -> int:
        """Groups that may wait in the queue."""
        return self.cfg.queue_updates * self.tasks_per_update

    async def submit(self, samples: Sequence[StepSample], group_id: str = "") -> int:
        """Queue one sampled group's samples, possibly none (waits while the queue is
        full); returns how many were kept: all of them, or none if the group is stale."""
        async with self._space:
            await self._space.wait_for(
                lambda: self._stopped or self._queue.qsize() < self.queue_bound
            )
            await self._count("samples_collected", len(samples))
            if self._stopped:  # reached its update budget: nothing more is trained
                await self._count("unused_at_end", len(samples))
                return 0
            own = [s.version for s in samples if not s.replayed]
            if own and min(own) < self.version - self.eta:
                self._stale_since_update += len(samples)
                await self._count("stale_dropped", len(samples))
                samples = ()
            self._queue.put_nowait(_QueuedGroup(group_id, tuple(samples)))
            self.groups_submitted += 1
            return len(samples)

    async def took_step(self, step: int) -> bool:
        """Wait until this learner has taken RL step `step` (True) or stopped before
        it (False): what a follower asks before training the same step."""
        async with self._stepped:
            await self._stepped.wait_for(lambda: self.steps >= step or self._stopped)
            return self.steps >= step

    async def settled(self, step: int) -> bool:
        """Wait until RL step `step` has been trained and synced (True) or this learner
        stopped before it (False)."""
        async with self._stepped:
            await self._stepped.wait_for(lambda: self.steps_done >= step or self._stopped)
            return self.steps_done >= step

    async def _count(self, name: str, n: int) -> None:
        """Add to an attribute and to its store counter `<role>_<name>`."""
        setattr(self, name, getattr(self, name) + n)
        await self.store.incr(f"{self.role}_{name}", n)

    async def finish(self) -> None:
        """No more samples: train the whole steps queued, then `run` returns."""
        self._queue.put_nowait(None)

    async def run(self, max_updates: int | None = None) -> None:
        left: list[_QueuedGroup] = []
        while max_updates is None or self.version < max_updates:
            groups = await self._next_step()
            if groups is None:
                break
            if len(groups) < self.tasks_per_update or (
                self.leader is not None and not await self.leader.took_step(self.steps + 1)
            ):
                left = groups  # cut short by the end of the run: not trained
                break
            async with self._stepped:
                self.steps += 1
                self._stepped.notify_all()
            await self.store.incr(f"{self.role}_steps")
            if any(g.samples for g in groups):
                await self._update(groups)
            else:
                self.steps_empty += 1
                await self.store.incr(f"{self.role}_steps_empty")
            async with self._stepped:
                self.steps_done += 1
                self._stepped.notify_all()
        async with self._space:
            self._stopped = True
            self._space.notify_all()
            while not self._queue.empty():
                item = self._queue.get_nowait()
                if item is not None:
                    left.append(item)
            unused = sum(len(g.samples) for g in left)
            if unused:
                await self._count("unused_at_end", unused)
        async with self._stepped:
            self._stepped.notify_all()

    async def _next_step(self) -> list[_QueuedGroup] | None:
        """The next step's groups; fewer when the run ended first; None if nothing came."""
        groups: list[_QueuedGroup] = []
        while len(groups) < self.tasks_per_update:
            item = await self._queue.get()
            async with self._space:
                self._space.notify_all()
            if item is None:
                return groups or None
            groups.append(item)
        return groups

    async def _update(self, groups: list[_QueuedGroup]) -> None:
        batch = [s for g in groups for s in g.samples]
        loop = asyncio.get_running_loop()
        lags = [self.version - s.version for s in batch]  # behaviour lag when trained
        started = time.time()
        # every span of an update carries the version it makes
        with spans.span(
            "learner_step",
            role=self.role,
            version=self.version + 1,
            groups=len(groups),
            samples=len(batch),
            lag_mean=sum(lags) / len(lags),
            lag_max=max(lags),
        ) as step:
            metrics = await loop.run_in_executor(self._thread, self.engine.train_step, batch)
            step.set(used=len(batch) - int(metrics.get("samples_low_entropy", 0)))
        version = self.version
        with spans.span("checkpoint", role=self.role, version=version):
            await loop.run_in_executor(self._thread, self._checkpoint, version)
        trained = time.time()
        await self.store.set_counter(f"{self.role}_updates", version)
        # The engine reports the samples it left out (entropy selection), if any.
        unselected = int(metrics.get("samples_low_entropy", 0))
        await self._count("samples_used", len(batch) - unselected)
        if unselected:
            await self._count("unused_low_entropy", unselected)
        if self.on_metrics is not None:
            self.on_metrics(self.role, {**metrics, **self._report(groups, batch, version)}, version)
        self._stale_since_update = 0
        if self.gate is not None:
            await self.gate.set_versions(learner=version)
        synced: float | None = None
        if self.sync is not None and version % self.cfg.sync_every == 0:
            with spans.span("weight_sync", role=self.role, version=version):
                await self.sync.push(self.engine, version)
            await self.store.incr("weight_syncs")
            synced = time.time()
            if self.gate is not None:
                await self.gate.set_versions(serving=version)
        await self.store.add_event(
            UPDATE,
            self.role,
            {"version": version, "started_at": started, "trained_at": trained, "synced_at": synced},
        )

    def _report(
        self, groups: list[_QueuedGroup], batch: list[StepSample], version: int
    ) -> dict[str, float]:
        """What this update was made of: groups, samples, how old, which steps."""
        indexes = {s.step_index for s in batch if s.step_index >= 0}
        return {
            "groups": float(len(groups)),
            "groups_with_samples": float(sum(1 for g in groups if g.samples)),
            "samples": float(len(batch)),
            # success replay: trained with their stored logprobs, lag in version_lag_max
            "samples_replayed": float(sum(1 for s in batch if s.replayed)),
            "samples_dropped_stale": float(self._stale_since_update),
            # the version the update started from minus each sample's behavior version
            "version_lag_max": float(max(version - 1 - s.version for s in batch)),
            "step_index_max": float(max(indexes, default=-1)),
            "step_indexes": float(len(indexes)),
        }

    def _checkpoint(self, version: int) -> None:
        """Write `step-N` atomically and point `latest` at it; then remove what
        `keeping` does not keep (by default all but the newest two)."""
        root = self.checkpoint_dir / self.role
        tmp = root / f".tmp-{version}"
        final = root / f"step-{version:06d}"
        shutil.rmtree(tmp, ignore_errors=True)
        self.engine.save_checkpoint(tmp)
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        pointer = root / "latest.json"
        pointer_tmp = root / "latest.json.tmp"
        pointer_tmp.write_text(json.dumps({"version": version, "path": final.name}))
        os.replace(pointer_tmp, pointer)
        prune(root, self.keeping)

    async def close(self) -> None:
        self._thread.shutdown(wait=True)


def latest_checkpoint(checkpoint_dir: Path, role: Role) -> tuple[Path, int] | None:
    """(directory, version) of a role's last complete checkpoint, if any."""
    pointer = checkpoint_dir / role / "latest.json"
    if not pointer.is_file():
        return None
    data: dict[str, Any] = json.loads(pointer.read_text())
    return checkpoint_dir / role / data["path"], int(data["version"])
