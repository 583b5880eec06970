"""vLLM launcher: command construction only (no GPU, no vllm here)."""

import json
import subprocess
import sys

from cua_rl.inference.vllm_engine import (
    WORKER_EXTENSION,
    VllmEngineConfig,
    build_vllm_command,
    update_weights_rpc,
    vllm_environment,
)


def _flag(cmd: list[str], name: str) -> str:
    return cmd[cmd.index(name) + 1]


def test_command_carries_protocol_flags() -> None:
    cfg = VllmEngineConfig(
        model="/ckpt/policy",
        port=9001,
        served_model_name="policy",
        max_images_per_prompt=3,
        max_logprobs=5,
        mm_processor_kwargs={"max_pixels": 1003520},
    )
    cmd = build_vllm_command(cfg)
    assert cmd[:3] == ["vllm", "serve", "/ckpt/policy"]
    assert _flag(cmd, "--port") == "9001"
    assert json.loads(_flag(cmd, "--limit-mm-per-prompt")) == {"image": 3, "video": 0}
    assert _flag(cmd, "--max-logprobs") == "5"
    assert _flag(cmd, "--logprobs-mode") == "processed_logprobs"
    assert _flag(cmd, "--worker-extension-cls") == WORKER_EXTENSION
    assert _flag(cmd, "--served-model-name") == "policy"
    assert json.loads(_flag(cmd, "--mm-processor-kwargs")) == {"max_pixels": 1003520}
    assert "--enable-prefix-caching" in cmd


def test_extension_class_path_resolves_without_vllm() -> None:
    code = (
        "import importlib, sys\n"
        f"mod, cls = {WORKER_EXTENSION!r}.rsplit('.', 1)\n"
        "ext = getattr(importlib.import_module(mod), cls)\n"
        "assert hasattr(ext, 'update_weights_from_path')\n"
        "assert hasattr(ext, 'update_weight_from_broadcast')\n"
        "assert hasattr(ext, 'reset_encoder_cache')\n"
        "assert 'vllm' not in sys.modules and 'torch' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_dev_mode_env_and_update_sequence_resets_caches() -> None:
    assert vllm_environment({})["VLLM_SERVER_DEV_MODE"] == "1"
    routes = [step["route"] for step in update_weights_rpc("/ckpt/v3", 3)]
    assert routes[0] == "/collective_rpc"
    assert {"/reset_prefix_cache", "/reset_mm_cache"} <= set(routes)


def test_checkpoint_tensors_are_read_from_all_shards(tmp_path) -> None:
    import torch
    from safetensors.torch import save_file

    from cua_rl.inference.vllm_worker_ext import iter_checkpoint_tensors

    save_file({"a": torch.ones(2)}, str(tmp_path / "model-00001.safetensors"))
    save_file({"b": torch.zeros(3)}, str(tmp_path / "model-00002.safetensors"))
    names = {name: t.shape[0] for name, t in iter_checkpoint_tensors(tmp_path)}
    assert names == {"a": 2, "b": 3}
