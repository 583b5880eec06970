"""vLLM engine: the command, environment and interpreter we hand to vLLM (no vLLM here)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cua_rl.errors import ConfigError
from cua_rl.inference.config import ModelServersConfig
from cua_rl.inference.launcher import vllm_argv
from cua_rl.inference.vllm_engine import (
    MIDDLEWARE,
    READY_MARK,
    SIDE_DIR,
    WORKER_EXTENSION,
    VllmEngineConfig,
    build_vllm_command,
    resolve_vllm_python,
    vllm_environment,
)


def _flag(cmd: list[str], name: str) -> str:
    return cmd[cmd.index(name) + 1]


def test_command_carries_protocol_flags() -> None:
    cfg = VllmEngineConfig(
        model="/ckpt/policy",
        device="cuda",
        port=9001,
        served_model_name="policy",
        max_images_per_prompt=3,
        max_logprobs=5,
        mm_processor_kwargs={"max_pixels": 1003520},
    )
    cmd = build_vllm_command(cfg, "/venv/bin/python")
    assert cmd[:3] == ["/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server"]
    assert _flag(cmd, "--model") == "/ckpt/policy"
    assert _flag(cmd, "--port") == "9001"
    assert json.loads(_flag(cmd, "--limit-mm-per-prompt")) == {"image": 3, "video": 0}
    assert _flag(cmd, "--max-logprobs") == "5"
    assert _flag(cmd, "--logprobs-mode") == "processed_logprobs"
    assert _flag(cmd, "--worker-extension-cls") == WORKER_EXTENSION
    assert _flag(cmd, "--middleware") == MIDDLEWARE
    assert _flag(cmd, "--served-model-name") == "policy"
    assert json.loads(_flag(cmd, "--mm-processor-kwargs")) == {"max_pixels": 1003520}
    assert "--enable-prefix-caching" in cmd
    assert _flag(cmd, "--dtype") == "auto"
    assert _flag(cmd, "--gpu-memory-utilization") == "0.85"


def test_cpu_defaults_and_environment() -> None:
    cfg = VllmEngineConfig(model="/m", device="cpu", version=4, cpu_kv_cache_gib=2)
    cmd = build_vllm_command(cfg)
    assert _flag(cmd, "--dtype") == "float32"
    assert _flag(cmd, "--gpu-memory-utilization") == "0.1"
    env = vllm_environment(cfg, {"PYTHONPATH": "/project"})
    assert env["PYTHONPATH"] == str(SIDE_DIR)  # the project's path is not vLLM's
    assert env["CUA_RL_MODEL_VERSION"] == "4"
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "2"
    assert "VLLM_CPU_KVCACHE_SPACE" not in vllm_environment(
        VllmEngineConfig(model="/m", device="cuda"), {}
    )


def test_side_directory_holds_only_the_module() -> None:
    files = {p.name for p in SIDE_DIR.iterdir() if p.name != "__pycache__"}
    assert files == {"cua_rl_vllm.py"}


def test_side_module_imports_only_the_standard_library() -> None:
    code = (
        "import sys\n"
        f"sys.path[:0] = [{str(SIDE_DIR)!r}]\n"
        "before = set(sys.modules)\n"
        "import cua_rl_vllm as m\n"
        "assert hasattr(m.WeightSyncExtension, 'update_weights_from_path')\n"
        "assert hasattr(m.WeightSyncExtension, 'update_weights_from_link')\n"
        "assert callable(m.version_middleware)\n"
        "new = {n.split('.')[0] for n in set(sys.modules) - before}\n"
        "assert not new & {'cua_rl', 'torch', 'vllm', 'starlette', 'pydantic'}, new\n"
    )
    subprocess.run([sys.executable, "-I", "-c", code], check=True)


def test_update_bodies_are_validated_like_the_hf_engine(tmp_path: Path) -> None:
    sys.path.insert(0, str(SIDE_DIR))
    try:
        import cua_rl_vllm as side
    finally:
        sys.path.remove(str(SIDE_DIR))
    (tmp_path / "config.json").write_text("{}")
    assert side.parse_update({"version": 2, "path": str(tmp_path)}) == (2, str(tmp_path))
    link = {"host": "h", "port": 1, "manifest": [{"name": "w", "shape": [2], "dtype": "float32"}]}
    assert side.parse_update({"version": 3, "collective": link}) == (3, link)
    bucketed = {**link, "bucket_bytes": 1 << 26}
    assert side.parse_update({"version": 4, "collective": bucketed}) == (4, bucketed)
    cases = [
        ([], "body"),
        ({"version": "1", "path": "x"}, "version"),
        ({"version": 1, "path": str(tmp_path / "nope")}, "path"),
        ({"version": 1, "collective": {"host": "h"}}, "collective"),
        (
            {
                "version": 1,
                "collective": {**link, "manifest": [{"name": "w", "shape": [1], "dtype": "int8"}]},
            },
            "collective.manifest",
        ),
        (
            {
                "version": 1,
                "collective": {
                    **link,
                    "manifest": [{"name": "w", "shape": [-1], "dtype": "float32"}],
                },
            },
            "collective.manifest",
        ),
        ({"version": 1, "collective": {**link, "bucket_bytes": -1}}, "collective.bucket_bytes"),
        ({"version": 1, "collective": {**link, "bucket_bytes": True}}, "collective.bucket_bytes"),
    ]
    for body, param in cases:
        with pytest.raises(side._BadRequest) as err:
            side.parse_update(body)
        assert err.value.param == param


def test_checkpoint_tensors_are_read_from_all_shards(tmp_path: Path) -> None:
    import torch
    from safetensors.torch import save_file

    sys.path.insert(0, str(SIDE_DIR))
    try:
        from cua_rl_vllm import iter_checkpoint_tensors
    finally:
        sys.path.remove(str(SIDE_DIR))
    save_file({"a": torch.ones(2)}, str(tmp_path / "model-00001.safetensors"))
    save_file({"b": torch.zeros(3)}, str(tmp_path / "model-00002.safetensors"))
    names = {name: t.shape[0] for name, t in iter_checkpoint_tensors(tmp_path)}
    assert names == {"a": 2, "b": 3}


def test_missing_environment_says_how_to_make_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUA_RL_VLLM_ENV", str(tmp_path / "env"))
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    with pytest.raises(ConfigError, match=r"run \./setup\.sh --vllm"):
        resolve_vllm_python()
    with pytest.raises(ConfigError, match="model_servers.python"):
        resolve_vllm_python(str(tmp_path / "missing" / "python"))
    (tmp_path / "env" / "bin").mkdir(parents=True)
    (tmp_path / "env" / READY_MARK).touch()
    assert resolve_vllm_python() == str(tmp_path / "env" / "bin" / "python")
    assert resolve_vllm_python(sys.executable) == sys.executable


def test_pool_config_reaches_the_replica_command() -> None:
    cfg = ModelServersConfig.model_validate(
        {
            "engine": "vllm",
            "python": "/venv/bin/python",
            "device": "cpu",
            "vllm": {"max_model_len": 4096, "cpu_kv_cache_gib": 0.5},
        }
    )
    argv = vllm_argv(cfg, "/ckpt", "/venv/bin/python", 8123, version=2)
    assert argv[1:3] == ["-m", "cua_rl.inference.vllm_engine"]
    engine = VllmEngineConfig.model_validate_json(argv[3])
    assert (engine.python, engine.port, engine.version, engine.max_model_len) == (
        "/venv/bin/python",
        8123,
        2,
        4096,
    )
    assert vllm_environment(engine, {})["VLLM_CPU_KVCACHE_SPACE"] == "0.5"
    with pytest.raises(ValueError, match="extra"):
        ModelServersConfig.model_validate({"vllm": {"no_such_flag": 1}})


def test_exec_shim_fails_in_one_line_without_vllm(tmp_path: Path) -> None:
    cfg = VllmEngineConfig(model="/m", python=str(tmp_path / "python"))
    env = {**os.environ, "CUA_RL_VLLM_ENV": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "cua_rl.inference.vllm_engine", cfg.model_dump_json()],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1].startswith("vLLM python ")
