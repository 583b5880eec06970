"""What the node a `runtime: local` run starts on offers: its GPUs, and whether the
run's processes may share them (runtime/devices.py hands them out)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ResourcesConfig(BaseModel):
    """The devices of the run's node (`runtime: local`; under `runtime: ray` Ray gives
    each actor its devices)."""

    model_config = ConfigDict(extra="forbid")

    gpus: int | None = Field(None, ge=0)
    """GPUs of this node the run may use: devices 0..gpus-1 (within
    CUDA_VISIBLE_DEVICES when set). None: the GPUs found (CUDA_VISIBLE_DEVICES, else
    /dev/nvidia*). Every vLLM replica on GPU gets its own device(s), every learner rank
    its own, the driver the devices of its in-process learners and no other."""
    share_gpus: bool = False
    """Let processes share a device when the node has fewer GPUs than the run's
    processes need (they are handed out round-robin; lower each vLLM pool's
    `vllm.gpu_memory_utilization` to match). False: such a layout is refused with
    what would fit."""
