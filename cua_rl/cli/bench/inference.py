"""`cua-rl bench inference`: throughput and latency of the hf engine and vLLM, side
by side (bench/inference.py measures them)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import click

from cua_rl.bench.inference import ENGINES
from cua_rl.command_output import emit_json


@click.command("inference")
@click.option(
    "--engines",
    default=",".join(ENGINES),
    show_default=True,
    help="Comma-separated engines to compare.",
)
@click.option(
    "--concurrency",
    default="1,8,32",
    show_default=True,
    help="Comma-separated numbers of concurrent clients.",
)
@click.option(
    "--seconds",
    type=click.FloatRange(min=0.1),
    default=20.0,
    show_default=True,
    help="Time each concurrency level sends requests for.",
)
@click.option(
    "--max-tokens",
    type=click.IntRange(min=1),
    default=32,
    show_default=True,
    help="New tokens per request (the random tiny model rarely stops earlier).",
)
@click.option(
    "--model",
    "model_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Checkpoint to serve (default: a tiny random Qwen3-VL).",
)
@click.option(
    "--ready-timeout",
    type=click.FloatRange(min=1),
    default=400.0,
    show_default=True,
    help="Deadline for a replica to start.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def bench_inference(
    engines: str,
    concurrency: str,
    seconds: float,
    max_tokens: int,
    model_dir: Path | None,
    ready_timeout: float,
    as_json: bool,
) -> None:
    """Requests/s and p50/p99 latency of policy-shaped requests, hf and vLLM side by side."""
    from cua_rl.bench.inference import run_bench
    from cua_rl.errors import ConfigError

    chosen = [e.strip() for e in engines.split(",") if e.strip()]
    if unknown := sorted(set(chosen) - set(ENGINES)):
        raise click.BadParameter(
            f"unknown engines {unknown}; expected some of {ENGINES}", param_hint="--engines"
        )
    try:
        levels = [int(c) for c in concurrency.split(",")]
    except ValueError:
        raise click.BadParameter(
            "expected integers like 1,8,32", param_hint="--concurrency"
        ) from None
    if not levels or min(levels) < 1:
        raise click.BadParameter("expected positive integers", param_hint="--concurrency")
    start = time.monotonic()
    try:
        result = asyncio.run(
            run_bench(chosen, model_dir, levels, seconds, max_tokens, ready_timeout)
        )
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        emit_json(result)
        return
    for engine, by_level in result.items():
        for level, figures in by_level.items():
            click.echo(
                f"{engine:>5} c={level:>3}: {figures['rps']:7.2f} req/s  "
                f"p50 {figures['p50_ms']:8.1f} ms  p99 {figures['p99_ms']:8.1f} ms  "
                f"({figures['requests']} requests)"
            )
    click.echo(f"total {time.monotonic() - start:.0f} s")
