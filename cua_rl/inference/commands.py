"""`cua-rl tiny-model` and `cua-rl serve`: thin entry points, heavy imports inside."""

from __future__ import annotations

import time

import click


@click.command("tiny-model")
@click.argument("out_dir", type=click.Path(file_okay=False))
@click.option("--seed", default=0, show_default=True, help="Weight initialization seed.")
@click.option(
    "--primed/--random",
    "primed",
    default=True,
    show_default=True,
    help="Warm the weights up on the answer formats (tool calls, \\boxed votes) so that "
    "samples parse; --random keeps the plain random initialization.",
)
@click.option("--priming-steps", type=click.IntRange(min=1), envvar="CUA_RL_TINY_PRIMING_STEPS",
              help="Priming budget in optimizer steps (default 1000, ~4 min); fewer build "
              "faster and parse worse (tests set CUA_RL_TINY_PRIMING_STEPS).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def tiny_model(out_dir: str, seed: int, primed: bool, priming_steps: int | None,
               as_json: bool) -> None:
    """Build the tiny Qwen3-VL checkpoint into OUT_DIR (no download)."""
    from cua_rl.inference.tiny_model import build_tiny_model

    start = time.monotonic()
    built = build_tiny_model(out_dir, seed=seed, primed=primed, priming_steps=priming_steps)
    kind = "format-primed" if primed else "random"
    if as_json:
        from cua_rl.command_output import emit_json

        emit_json({"path": str(built.path), "kind": kind, "seed": seed,
                   "parameters": built.num_parameters,
                   "build_s": round(time.monotonic() - start, 1)})
        return
    click.echo(
        f"tiny {kind} Qwen3-VL checkpoint ({built.num_parameters:,} parameters, seed {seed}) "
        f"written to {built.path} in {time.monotonic() - start:.1f} s"
    )


@click.command("serve")
@click.option("--engine", type=click.Choice(["hf", "vllm"]), default="hf", show_default=True)
@click.option("--model", "model_dir", required=True, help="Checkpoint directory (HF layout).")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=int)
@click.option(
    "--version",
    "version",
    default=0,
    show_default=True,
    type=int,
    help="Weight version reported in x-model-version until the first update.",
)
@click.option("--threads", default=None, type=int, help="torch CPU threads (hf engine).")
@click.option(
    "--max-batch-rows",
    default=16,
    show_default=True,
    type=int,
    help="hf engine: sampled rows (sum of n) decoded together.",
)
@click.option(
    "--python",
    "python",
    default=None,
    help="vllm engine: vLLM's interpreter (default: the environment ./setup.sh --vllm builds).",
)
def serve(
    engine: str,
    model_dir: str,
    host: str,
    port: int,
    version: int,
    threads: int | None,
    max_batch_rows: int,
    python: str | None,
) -> None:
    """Serve MODEL over the OpenAI-compatible inference protocol (docs/architecture.md)."""
    from pathlib import Path

    from cua_rl.errors import ConfigError

    if engine == "hf" and not (Path(model_dir) / "config.json").is_file():
        raise ConfigError(f"{model_dir}: not a model directory (no config.json); build the "
                          "tiny model with `cua-rl tiny-model DIR` or give a checkpoint folder")
    if engine == "hf":
        from cua_rl.inference.hf_server import run_hf_server

        run_hf_server(model_dir, host, port, version, threads, max_batch_rows)
        return
    import os

    from cua_rl.inference.server_auth import TOKEN_ENV, warn_open_admin_routes
    from cua_rl.inference.vllm_engine import VllmEngineConfig, detect_device, exec_vllm

    if not os.environ.get(TOKEN_ENV):
        warn_open_admin_routes()

    exec_vllm(VllmEngineConfig(model=model_dir, host=host, port=port, version=version,
                               python=python, device=detect_device()))
