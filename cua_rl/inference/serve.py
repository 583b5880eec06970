"""One model server in the foreground (`cua-rl serve`): our hf engine, or vLLM with
our extension, both speaking the inference protocol of docs/architecture.md.

Heavy imports (torch, vLLM's interpreter) happen only for the engine chosen.
"""

from __future__ import annotations

import os
from pathlib import Path

from cua_rl.errors import ConfigError


def serve_model(
    engine: str,
    model_dir: str,
    *,
    host: str,
    port: int,
    version: int,
    threads: int | None = None,
    max_batch_rows: int = 16,
    python: str | None = None,
) -> None:
    """Serve `model_dir` with `engine` ("hf" or "vllm") until interrupted; the vllm
    engine replaces this process (exec). A folder without config.json is refused
    before anything loads (hf), and admin routes without a token are warned about."""
    if engine == "hf" and not (Path(model_dir) / "config.json").is_file():
        raise ConfigError(
            f"{model_dir}: not a model directory (no config.json); build the "
            "tiny model with `cua-rl tiny-model DIR` or give a checkpoint folder"
        )
    if engine == "hf":
        from cua_rl.inference.hf_server import run_hf_server

        run_hf_server(model_dir, host, port, version, threads, max_batch_rows)
        return
    from cua_rl.inference.server_auth import TOKEN_ENV, warn_open_admin_routes
    from cua_rl.inference.vllm_engine import VllmEngineConfig, detect_device, exec_vllm

    if not os.environ.get(TOKEN_ENV):
        warn_open_admin_routes()
    exec_vllm(
        VllmEngineConfig(
            model=model_dir,
            host=host,
            port=port,
            version=version,
            python=python,
            device=detect_device(),
        )
    )
