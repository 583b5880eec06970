"""vLLM worker extension: weight updates for a running `vllm serve` (GPU nodes only).

vLLM mixes this class into each GPU worker (`--worker-extension-cls`), so
`self.model_runner` and `self.device` are the worker's. Methods are invoked on
every worker through `collective_rpc` (HTTP `/collective_rpc` in dev mode).
Importing this module needs neither vLLM nor a GPU; the methods import what
they use.

Two update paths (DESIGN.md section 4.2):
- from a checkpoint dir: each worker reads the safetensors shards itself;
- by collective broadcast: the learner (rank 0) broadcasts tensors over a
  process group it created with every worker (NCCL on GPU), one call per tensor.
After either, the encoder cache must be cleared: cached vision embeddings were
computed with the old vision tower.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any


def iter_checkpoint_tensors(path: str | Path) -> Iterator[tuple[str, Any]]:
    """(name, tensor) for every tensor in the safetensors shards of a checkpoint dir."""
    from safetensors import safe_open

    shards = sorted(Path(path).glob("*.safetensors"))
    if not shards:
        raise FileNotFoundError(f"{path}: no *.safetensors shards in the checkpoint directory")
    for shard in shards:
        with safe_open(str(shard), framework="pt") as f:
            for name in f.keys():  # noqa: SIM118 - safe_open has no __iter__
                yield name, f.get_tensor(name)


class WeightSyncExtension:
    """Methods added to each vLLM GPU worker."""

    model_runner: Any
    device: Any
    weight_version: int = 0

    def update_weights_from_path(self, path: str, version: int) -> int:
        """Load every tensor of the checkpoint at `path` into the running model."""
        self.model_runner.model.load_weights(weights=iter_checkpoint_tensors(path))
        return self.finish_weight_update(version)

    def init_weight_update_group(
        self, master_address: str, master_port: int, rank_offset: int, world_size: int
    ) -> None:
        """Join the learner's broadcast group (learner is rank 0, workers follow)."""
        from vllm.distributed.device_communicators.pynccl import PyNcclCommunicator
        from vllm.distributed.parallel_state import get_world_group
        from vllm.distributed.utils import StatelessProcessGroup

        rank = get_world_group().rank + rank_offset
        group = StatelessProcessGroup.create(
            host=master_address, port=master_port, rank=rank, world_size=world_size
        )
        self.weight_update_group = PyNcclCommunicator(group, device=self.device)

    def update_weight_from_broadcast(self, name: str, dtype: str, shape: list[int]) -> None:
        """Receive one tensor broadcast by the learner and load it under `name`."""
        import torch

        tensor = torch.empty(shape, dtype=getattr(torch, dtype), device="cuda")
        self.weight_update_group.broadcast(tensor, src=0, stream=torch.cuda.current_stream())
        self.model_runner.model.load_weights(weights=[(name, tensor)])

    def finish_weight_update(self, version: int) -> int:
        """Mark the end of a broadcast update and drop caches built with the old weights."""
        import torch

        torch.cuda.synchronize()
        self.reset_encoder_cache()
        self.weight_version = version
        return version

    def reset_encoder_cache(self) -> None:
        """Drop cached vision-encoder outputs (stale once the vision tower changed)."""
        cache = getattr(self.model_runner, "encoder_cache", None)
        if cache is not None:
            cache.clear()

    def get_weight_version(self) -> int:
        return self.weight_version
