"""`cua-rl serve`: one model server, hf (ours) or vLLM (inference/serve.py)."""

from __future__ import annotations

import click


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
    from cua_rl.inference.serve import serve_model

    serve_model(
        engine,
        model_dir,
        host=host,
        port=port,
        version=version,
        threads=threads,
        max_batch_rows=max_batch_rows,
        python=python,
    )
