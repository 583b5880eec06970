"""A run directory with real learner checkpoints, made without desktops or servers.

The learner service trains a real engine on text samples and checkpoints after
every update exactly as in a run (`checkpoints/<role>/step-N`, `latest.json`); the
run's `config.yaml` names the base model as `cua-rl train` writes it. Export tests
start from this instead of a whole quickstart run (seconds instead of minutes).
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from cua_rl.config import RunConfig
from cua_rl.learner.base import TrainEngine
from cua_rl.learner.config import LearnerLoopConfig
from cua_rl.learner.service import LearnerService, Role
from cua_rl.store.async_run_store import AsyncRunStore
from cua_rl.types import StepSample

if TYPE_CHECKING:
    import torch


def text_samples(update: int) -> list[StepSample]:
    """Three text-only samples with mixed advantages (token ids inside the tiny vocab)."""
    messages = ({"role": "user", "content": f"Update {update}: open the file menu."},)
    return [
        StepSample(
            messages,
            tuple(range(100 + 7 * i, 110 + 8 * i)),
            tuple([-8.3] * (10 + i)),
            0,
            advantage=1.0 - 2.0 * ((i + update) % 2),
            trajectory_id=f"t{i}",
            step_index=0,
        )
        for i in range(3)
    ]


def exported(out: Path) -> dict[str, torch.Tensor]:
    """Every tensor of an HF folder's safetensors files."""
    from safetensors.torch import load_file

    return {k: v for f in sorted(out.glob("*.safetensors")) for k, v in load_file(f).items()}


def checkpoint_layout(run_dir: Path, role: Role, engine_checkpoint: Path, version: int) -> None:
    """Put an engine's `save_checkpoint` directory where the learner service would:
    `checkpoints/<role>/step-N` plus `latest.json` (for ranks started by hand)."""
    root = run_dir / "checkpoints" / role
    root.mkdir(parents=True)
    shutil.copytree(engine_checkpoint, root / f"step-{version:06d}")
    (root / "latest.json").write_text(
        json.dumps({"version": version, "path": f"step-{version:06d}"})
    )


def write_run_config(run_dir: Path, tiny_model_dir: Path) -> None:
    """`config.yaml` as `cua-rl train` writes it, the tiny model as both base models."""
    run_dir.mkdir(parents=True, exist_ok=True)
    cfg = RunConfig(tiny_model_dir=tiny_model_dir)
    (run_dir / "config.yaml").write_text(yaml.safe_dump(cfg.model_dump(mode="json")))


def train_and_checkpoint(run_dir: Path, engine: TrainEngine, role: Role, updates: int) -> None:
    """`updates` updates of `engine` through the learner service, each checkpointed."""
    asyncio.run(train_and_checkpoint_async(run_dir, engine, role, updates))


async def train_and_checkpoint_async(
    run_dir: Path, engine: TrainEngine, role: Role, updates: int
) -> None:
    """`train_and_checkpoint` inside a running event loop."""
    store = AsyncRunStore.open(run_dir)
    try:
        service = LearnerService(
            role,
            engine,
            store,
            LearnerLoopConfig(),
            checkpoint_dir=run_dir / "checkpoints",
            eta=updates,
        )
        run = asyncio.create_task(service.run(max_updates=updates))
        for update in range(updates):
            await service.submit(text_samples(update), f"g{update}")
        await service.finish()
        await asyncio.wait_for(run, 600)
        await service.close()
    finally:
        await store.close()
