"""One learner (policy or reward model) as an asyncio service.

It consumes `StepSample`s from a bounded queue, drops those too stale to train
on (behavior version older than `learner version - eta`, counted), trains in
batches on its own thread, checkpoints, then pushes the weights to its
inference pool. Updates are counted from the checkpointed version, so a run
resumed after a crash never counts an update twice or misses one: the store's
`<role>_updates` equals the version of the last checkpoint.

Order after each update: checkpoint (model, optimizer, versions) -> counters ->
weight sync -> version gate. A crash between any two of these resumes from the
checkpoint with at most the sync repeated, which is idempotent.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from cua_rl.learner.base import TrainEngine
from cua_rl.learner.weight_sync import WeightSync
from cua_rl.rollout.scheduler import VersionGate
from cua_rl.store.run_store import AsyncRunStore
from cua_rl.types import StepSample

Role = Literal["policy", "prm"]
MetricsHook = Callable[[str, dict[str, float], int], None]


class LearnerLoopConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    batch_samples: int = Field(16, ge=1)
    """Samples per update; a smaller remainder is trained when the run ends."""
    sync_every: int = Field(1, ge=1)
    """Push weights to the inference pool every K updates."""
    queue_size: int = Field(4096, ge=1)
    """Bound of the sample queue: producers wait when the learner falls behind."""


class LearnerService:
    def __init__(
        self,
        role: Role,
        engine: TrainEngine,
        store: AsyncRunStore,
        cfg: LearnerLoopConfig,
        *,
        checkpoint_dir: Path,
        sync: WeightSync | None = None,
        gate: VersionGate | None = None,
        eta: int = 2,
        on_metrics: MetricsHook | None = None,
    ) -> None:
        self.role = role
        self.engine = engine
        self.store = store
        self.cfg = cfg
        self.checkpoint_dir = checkpoint_dir
        self.sync = sync
        self.gate = gate
        self.eta = eta
        self.on_metrics = on_metrics
        # Unbounded underneath; `submit` enforces the bound so that stopping can
        # release every waiting producer at once.
        self._queue: asyncio.Queue[StepSample | None] = asyncio.Queue()
        self._space = asyncio.Condition()
        self._thread = ThreadPoolExecutor(1, thread_name_prefix=f"learner-{role}")
        self.stale_dropped = 0
        self._stopped = False

    @property
    def version(self) -> int:
        return self.engine.version

    async def submit(self, samples: list[StepSample]) -> None:
        for sample in samples:
            async with self._space:
                await self._space.wait_for(
                    lambda: self._stopped or self._queue.qsize() < self.cfg.queue_size)
                if self._stopped:  # reached its update budget: nothing more is trained
                    return
                self._queue.put_nowait(sample)

    async def finish(self) -> None:
        """No more samples: train what is queued, then `run` returns."""
        self._queue.put_nowait(None)

    async def run(self, max_updates: int | None = None) -> None:
        batch: list[StepSample] = []
        done = False
        while not done and (max_updates is None or self.version < max_updates):
            item = await self._queue.get()
            async with self._space:
                self._space.notify_all()
            if item is None:
                done = True
            elif item.version < self.version - self.eta:
                self.stale_dropped += 1
                await self.store.incr(f"{self.role}_stale_dropped")
            else:
                batch.append(item)
            if batch and (len(batch) >= self.cfg.batch_samples or done):
                await self._update(batch)
                batch = []
        async with self._space:
            self._stopped = True
            self._space.notify_all()

    async def _update(self, batch: list[StepSample]) -> None:
        loop = asyncio.get_running_loop()
        metrics = await loop.run_in_executor(self._thread, self.engine.train_step, batch)
        version = self.version
        await loop.run_in_executor(self._thread, self._checkpoint, version)
        await self.store.call(self.store.sync.set_counter, f"{self.role}_updates", version)
        if self.on_metrics is not None:
            self.on_metrics(self.role, {**metrics, "samples": float(len(batch))}, version)
        if self.gate is not None:
            await self.gate.set_versions(learner=version)
        if self.sync is not None and version % self.cfg.sync_every == 0:
            await self.sync.push(self.engine, version)
            await self.store.incr("weight_syncs")
            if self.gate is not None:
                await self.gate.set_versions(serving=version)

    def _checkpoint(self, version: int) -> None:
        """Write `step-N` atomically and point `latest` at it; keep one older."""
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
        for old in sorted(root.glob("step-*"))[:-2]:
            shutil.rmtree(old, ignore_errors=True)

    async def close(self) -> None:
        self._thread.shutdown(wait=True)


def latest_checkpoint(checkpoint_dir: Path, role: Role) -> tuple[Path, int] | None:
    """(directory, version) of a role's last complete checkpoint, if any."""
    pointer = checkpoint_dir / role / "latest.json"
    if not pointer.is_file():
        return None
    data: dict[str, Any] = json.loads(pointer.read_text())
    return checkpoint_dir / role / data["path"], int(data["version"])
