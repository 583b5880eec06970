"""One real training step of a learner on the tiny model, in a fresh process, and the
peak resident memory it added (printed as JSON for test_memory_estimate.py).

argv: model_dir micro_batch_tokens engine(torch|deepspeed). The baseline is taken
once every library is imported and the processor loaded, then the kernel's peak
counter (VmHWM) is reset; the step's peak over the baseline is what a rank needs
for its model, reference, optimizer and activations.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch

from cua_rl.learner.config import DeepSpeedEngineConfig, LearnerConfig, TorchEngineConfig
from cua_rl.types import StepSample


def status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


def samples(tokens: int) -> list[StepSample]:
    """Samples that fill one micro-batch of `tokens` tokens, mostly response."""
    messages = ({"role": "user", "content": "Open the file menu."},)
    per = 480
    return [
        StepSample(
            messages,
            tuple(100 + (7 * j + i) % 3800 for j in range(per)),
            tuple([-8.3] * per),
            0,
            advantage=1.0 - 2.0 * (i % 2),
        )
        for i in range(max(1, tokens // (per + 40)))
    ]


def main() -> None:
    model_dir, tokens, engine_type = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    torch.set_num_threads(1)
    engine_cfg = (
        DeepSpeedEngineConfig(zero_stage=3) if engine_type == "deepspeed" else TorchEngineConfig()
    )
    cfg = LearnerConfig(lr=1e-3, micro_batch_tokens=tokens, engine=engine_cfg)
    if engine_type == "deepspeed":
        import deepspeed  # noqa: F401 - imported before the baseline

        from cua_rl.learner.engine_deepspeed import DeepSpeedTrainEngine as Engine
    else:
        from cua_rl.learner.engine_torch import TorchTrainEngine as Engine
    from transformers import AutoProcessor

    AutoProcessor.from_pretrained(model_dir)
    batch = samples(tokens)
    baseline = status("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    engine = Engine(cfg, model_dir)
    metrics = engine.train_step(batch)
    peak = status("VmHWM")
    print(
        json.dumps(
            {
                "peak_bytes": peak - baseline,
                "micro_batches": metrics.get("micro_batches"),
                "pid": os.getpid(),
            }
        )
    )


if __name__ == "__main__":
    main()
