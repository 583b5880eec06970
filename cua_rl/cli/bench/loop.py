"""`cua-rl bench loop`: the real training loop, asynchronous and synchronous, side by
side, and the simulator's prediction for this machine (bench/loop.py runs
and analyses the runs)."""

from __future__ import annotations

from pathlib import Path

import click

from cua_rl.command_output import emit_json


@click.command("loop")
@click.option(
    "--preset",
    default="quickstart",
    show_default=True,
    help="The run every mode starts from (its desktops, tasks, group size).",
)
@click.option(
    "--engine",
    type=click.Choice(["vllm", "hf"]),
    default="vllm",
    show_default=True,
    help="Both model pools' engine.",
)
@click.option(
    "--updates",
    type=click.IntRange(1),
    default=6,
    show_default=True,
    help="Policy updates per mode (train.max_policy_updates).",
)
@click.option(
    "--modes",
    default="async,sync,async_global_pause",
    show_default=True,
    help="Comma-separated modes, async among them: sync, async_global_pause, and "
    "async_spares, async_forks, async_pillow (each of issue 51's switches turned "
    "from its default; their task order is compared with async's). With sync: "
    "the async/sync ratio and the simulator's prediction.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Folder for the runs (one per mode), latency.json and loop.json.",
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--spares",
    type=click.IntRange(1),
    default=2,
    show_default=True,
    help="fleet.spare_desktops of the async_spares mode.",
)
@click.option("--tiny-model-dir", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="desktops.provider.state_dir of every run.",
)
@click.option(
    "--timeout-s",
    type=click.FloatRange(min=60),
    default=3600.0,
    show_default=True,
    help="Per mode.",
)
@click.option(
    "--reuse",
    is_flag=True,
    help="Analyse the runs already in OUT again instead of running a mode whose "
    "run finished there (its update events are stored).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def bench_loop(
    preset: str,
    engine: str,
    updates: int,
    modes: str,
    out: Path,
    seed: int,
    spares: int,
    tiny_model_dir: Path | None,
    state_dir: Path | None,
    timeout_s: float,
    reuse: bool,
    as_json: bool,
) -> None:
    """The real loop in its async and sync modes: throughput, busy fractions, where
    an episode's time goes (with spare desktops, group forks and the old screenshot
    encoder as modes of their own), and the simulator's prediction for this machine."""
    from cua_rl.bench.loop import MODES, run_loop_bench, summary_lines

    chosen = [m.strip() for m in modes.split(",") if m.strip()]
    unknown = sorted(set(chosen) - set(MODES))
    if unknown or "async" not in chosen:
        raise click.BadParameter(
            f"modes must include async, from {sorted(MODES)}; got {modes!r}", param_hint="--modes"
        )
    if engine == "vllm":
        from cua_rl.errors import ConfigError
        from cua_rl.inference.vllm_engine import resolve_vllm_python

        try:
            resolve_vllm_python()
        except ConfigError as exc:
            raise click.ClickException(f"{exc} (or pass --engine hf)") from None
    result = run_loop_bench(
        preset,
        engine,
        updates,
        chosen,
        out,
        seed=seed,
        spares=spares,
        tiny_model_dir=tiny_model_dir,
        state_dir=state_dir,
        timeout_s=timeout_s,
        reuse=reuse,
        log=lambda line: click.echo(line, err=True),
    )
    if as_json:
        emit_json(result)
        return
    click.echo(summary_lines(result))
