"""The `vllm` engine: builds and launches `vllm serve` for a Qwen3-VL checkpoint.

Importable without vLLM (it is only needed on GPU nodes). The server is the
stock OpenAI-compatible one, configured so that our protocol holds:
- `--logprobs-mode processed_logprobs`: logprobs of the temperature-scaled
  distribution the token was sampled from, matching the hf engine
  (sampling.py). vLLM computes processed logprobs after top-k/top-p masking,
  the hf engine before: the two agree exactly only with top_p = 1, which is
  what training rollouts should use.
- `--max-logprobs`: allows `logprobs: true` (and top alternatives if asked).
- `--limit-mm-per-prompt`: the policy sees up to 3 screenshots, the PRM 2.
- `--worker-extension-cls`: our `WeightSyncExtension` (vllm_worker_ext.py),
  whose methods are called through `collective_rpc` to update weights from a
  checkpoint dir or by collective broadcast; `VLLM_SERVER_DEV_MODE=1` exposes
  `/collective_rpc`, `/reset_prefix_cache` and `/reset_mm_cache` over HTTP.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

from pydantic import BaseModel, Field

from cua_rl.inference.owner_watch import terminate_with_owner_across_exec

WORKER_EXTENSION = "cua_rl.inference.vllm_worker_ext.WeightSyncExtension"


class VllmEngineConfig(BaseModel):
    """How one vLLM replica is started."""

    model: str
    """Checkpoint directory or hub id of the served model."""
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    served_model_name: str | None = None
    """Name clients send as `model`; defaults to the model path."""
    tensor_parallel_size: int = Field(default=1, ge=1)
    gpu_memory_utilization: float = Field(default=0.85, gt=0.0, le=1.0)
    max_model_len: int | None = Field(default=32768, ge=1)
    dtype: str = "bfloat16"
    max_images_per_prompt: int = Field(default=3, ge=0)
    """Screenshots per request (policy: last 3; PRM: 2)."""
    max_logprobs: int = Field(default=20, ge=0)
    logprobs_mode: str = "processed_logprobs"
    """See the module docstring: keeps behavior logprobs those of the sampled distribution."""
    enable_prefix_caching: bool = True
    """Sticky routing sends an episode's turns to one replica so this cache hits."""
    max_num_seqs: int | None = Field(default=None, ge=1)
    seed: int = 0
    mm_processor_kwargs: dict[str, Any] | None = None
    """e.g. {"max_pixels": 1003520} to cap screenshot tokens."""
    extra_args: list[str] = Field(default_factory=list)
    """Appended verbatim (escape hatch for flags not modelled here)."""


def build_vllm_command(config: VllmEngineConfig, executable: str = "vllm") -> list[str]:
    """The argv of `vllm serve` for this config (no shell quoting needed)."""
    limits = {"image": config.max_images_per_prompt, "video": 0}
    cmd = [
        executable, "serve", config.model,
        "--host", config.host,
        "--port", str(config.port),
        "--dtype", config.dtype,
        "--tensor-parallel-size", str(config.tensor_parallel_size),
        "--gpu-memory-utilization", str(config.gpu_memory_utilization),
        "--limit-mm-per-prompt", json.dumps(limits, separators=(",", ":")),
        "--max-logprobs", str(config.max_logprobs),
        "--logprobs-mode", config.logprobs_mode,
        "--worker-extension-cls", WORKER_EXTENSION,
        "--seed", str(config.seed),
        "--trust-remote-code",
    ]  # fmt: skip
    if config.served_model_name:
        cmd += ["--served-model-name", config.served_model_name]
    if config.max_model_len is not None:
        cmd += ["--max-model-len", str(config.max_model_len)]
    if config.max_num_seqs is not None:
        cmd += ["--max-num-seqs", str(config.max_num_seqs)]
    cmd += ["--enable-prefix-caching" if config.enable_prefix_caching
            else "--no-enable-prefix-caching"]  # fmt: skip
    if config.mm_processor_kwargs:
        cmd += ["--mm-processor-kwargs", json.dumps(config.mm_processor_kwargs)]
    return cmd + list(config.extra_args)


def vllm_environment(base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for the server: dev mode exposes the weight-update and cache-reset routes."""
    env = dict(os.environ if base is None else base)
    env["VLLM_SERVER_DEV_MODE"] = "1"
    env.setdefault("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")  # collective_rpc args
    return env


def exec_vllm(config: VllmEngineConfig) -> None:
    """Replace this process with `vllm serve` (the `cua-rl serve --engine vllm` body)."""
    executable = shutil.which("vllm")
    if executable is None:
        raise SystemExit("vllm is not installed here: pip install 'cua-rl[vllm]' on a GPU node")
    terminate_with_owner_across_exec()  # no watch survives the exec; the kernel's signal does
    os.execvpe(executable, build_vllm_command(config, executable), vllm_environment())


def update_weights_rpc(path: str, version: int) -> list[dict[str, Any]]:
    """The HTTP calls (route, JSON body) that update one replica from a checkpoint dir.

    Order matters: new weights first, then drop caches computed with the old ones
    (prefix KV and encoder outputs), so no later request mixes versions.
    """
    return [
        {"route": "/collective_rpc",
         "body": {"method": "update_weights_from_path", "args": [path, version]}},
        {"route": "/reset_prefix_cache", "body": None},
        {"route": "/reset_mm_cache", "body": None},
        {"route": "/collective_rpc", "body": {"method": "reset_encoder_cache"}},
    ]  # fmt: skip
