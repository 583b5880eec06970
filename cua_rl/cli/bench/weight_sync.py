"""`cua-rl bench weight-sync`: bytes per second and bucket count of the learner's weight
broadcast into the vLLM side's receiver (bench/weight_sync.py measures them)."""

from __future__ import annotations

from pathlib import Path

import click


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise click.BadParameter(
            "expected integers like 0,8,64", param_hint="--bucket-mb"
        ) from None
    if not sizes or min(sizes) < 0:
        raise click.BadParameter("expected non-negative integers", param_hint="--bucket-mb")
    return list(dict.fromkeys(sizes))


@click.command("weight-sync")
@click.option(
    "--mb",
    type=click.IntRange(min=1),
    default=1024,
    show_default=True,
    help="MiB of Qwen3-VL-8B-shaped bf16 weights sent per sync.",
)
@click.option(
    "--bucket-mb",
    "bucket_mb",
    default="0,8,64,256",
    show_default=True,
    help="Comma-separated bucket sizes to measure (train.sync.bucket_mb; 0: one "
    "tensor per broadcast, the protocol before buckets).",
)
@click.option(
    "--repeats",
    type=click.IntRange(min=1, max=100),
    default=3,
    show_default=True,
    help="Syncs per bucket size (after one untimed warm-up sync).",
)
@click.option(
    "--timeout",
    "timeout_s",
    type=click.FloatRange(min=1),
    default=300.0,
    show_default=True,
    help="Deadline of one sync.",
)
@click.option(
    "--plot",
    "plot_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also draw bytes/s and buckets per bucket size to this PNG.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def bench_weight_sync(
    mb: int, bucket_mb: str, repeats: int, timeout_s: float, plot_path: Path | None, as_json: bool
) -> None:
    """Bytes/s and buckets of the weight broadcast, gloo on 127.0.0.1, into the vLLM side."""
    from cua_rl.bench.weight_sync import run_bench
    from cua_rl.command_output import emit_json

    result = run_bench(
        mb,
        _sizes(bucket_mb),
        repeats=repeats,
        timeout_s=timeout_s,
        log=lambda line: click.echo(line, err=True),
    )
    if plot_path is not None:
        from cua_rl.bench.weight_sync_plot import plot_weight_sync

        result["png"] = str(plot_weight_sync(result, plot_path))
    if as_json:
        emit_json(result)
        return
    receiver = result["receiver"]
    click.echo(
        f"receiver: {receiver['environment']} ({receiver['python']}, torch "
        f"{receiver['torch']}, vLLM {receiver['vllm']})"
    )
    click.echo(
        f"sent: {result['tensors']} tensors, {result['bytes'] / 2**20:.0f} MiB bf16, "
        f"{result['link']}; load average {result['load_avg_before'][0]} -> "
        f"{result['load_avg_after'][0]} on {result['cpus']} CPUs"
    )
    model = result["model_8b"]
    for r in result["results"]:
        whole = model["by_bucket_mb"][str(r["bucket_mb"])]
        default = "  (default)" if r["bucket_mb"] == result["default_bucket_mb"] else ""
        click.echo(
            f"bucket {r['bucket_mb']:>4} MiB: {r['gb_per_s']:6.2f} GB/s, "
            f"{r['buckets']:>4} buckets, {r['sync_s_median']:.3f} s per sync, "
            f"{r['per_bucket_ms_median']:.1f} ms per bucket (max "
            f"{r['per_bucket_ms_max']:.0f}); 8B: {whole['buckets']} buckets, "
            f"~{whole['seconds_per_replica']:.0f} s per replica{default}"
        )
    if "png" in result:
        click.echo(f"plot: {result['png']}")
