"""One rank of a DeepSpeed learner on CPU, started torchrun-style by test_learner_deepspeed.py.

argv: model_dir out_dir zero_stages (comma-separated; one process pair runs them all, so
the slow imports are paid once). Per stage: one step on this rank's own samples (ranks get
different ones on purpose), an HF export, then checkpoint resume in-process: save, step,
load, the same step again. Writes `stage{s}/rank{r}.pt` with what the test compares.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch

from cua_rl.learner.config import DeepSpeedEngineConfig, LearnerConfig
from cua_rl.learner.engine_deepspeed import DeepSpeedTrainEngine
from cua_rl.types import StepSample

LR = 1e-3


def rank_samples(rank: int, step: int = 0) -> list[StepSample]:
    """Rank r gets 2 + r text-only samples with distinct lengths and advantages."""
    messages = ({"role": "user", "content": f"Rank {rank} step {step}: open the file menu."},)
    return [
        StepSample(
            messages,
            tuple(range(100 + 7 * i + rank, 110 + 8 * i + rank)),
            tuple([-8.3] * (10 + i)),
            0,
            advantage=1.0 - 2.0 * ((i + rank + step) % 2),
        )
        for i in range(2 + rank)
    ]


def params(engine: DeepSpeedTrainEngine) -> dict[str, torch.Tensor]:
    return {n: p.clone() for n, p in engine.named_parameters()}


def main() -> None:
    model_dir, out_root = sys.argv[1], Path(sys.argv[2])
    torch.set_num_threads(1)
    for stage in (int(s) for s in sys.argv[3].split(",")):
        out_dir = out_root / f"stage{stage}"
        out_dir.mkdir(exist_ok=True)
        run_stage(model_dir, out_dir, stage)


def run_stage(model_dir: str, out_dir: Path, stage: int) -> None:
    rank = int(os.environ["RANK"])
    cfg = LearnerConfig(
        engine=DeepSpeedEngineConfig(zero_stage=stage), lr=LR, micro_batch_tokens=40
    )  # ranks end up with different micro-batch counts
    engine = DeepSpeedTrainEngine(cfg, model_dir)
    before = params(engine)
    metrics = engine.train_step(rank_samples(rank))
    after = params(engine)
    engine.export_weights(out_dir / "export")

    engine.save_checkpoint(out_dir / "ckpt")
    engine.train_step(rank_samples(rank, step=1))
    continued = params(engine)
    engine.load_checkpoint(out_dir / "ckpt")
    restored_version = engine.version
    engine.train_step(rank_samples(rank, step=1))
    resumed = params(engine)
    torch.save(
        {
            "before": before,
            "after": after,
            "metrics": metrics,
            "continued": continued,
            "resumed": resumed,
            "restored_version": restored_version,
        },
        out_dir / f"rank{rank}.pt",
    )


if __name__ == "__main__":
    main()
