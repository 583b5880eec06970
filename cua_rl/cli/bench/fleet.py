"""`cua-rl bench fleet --simulated`: asynchronous fleet vs a synchronous batch
baseline on simulated desktops and model servers (bench/fleet.py runs both)."""

from __future__ import annotations

import asyncio

import click

from cua_rl.command_output import emit_json


@click.command("fleet")
@click.option("--simulated", is_flag=True, help="Simulated desktops and model servers.")
@click.option("--actors", type=click.IntRange(1), default=100, show_default=True)
@click.option("--group-size", type=click.IntRange(1), default=8, show_default=True)
@click.option("--eta", type=click.IntRange(0), default=2, show_default=True)
@click.option(
    "--latency",
    "latency_file",
    type=click.Path(exists=True, dir_okay=False),
    help="YAML/JSON overriding the latency model's defaults.",
)
@click.option(
    "--duration-s",
    type=click.FloatRange(min=1.0),
    default=60.0,
    show_default=True,
    help="Target wall time of both modes together.",
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def bench_fleet(
    simulated: bool,
    actors: int,
    group_size: int,
    eta: int,
    latency_file: str | None,
    duration_s: float,
    seed: int,
    as_json: bool,
) -> None:
    """Fleet throughput: async actors vs a synchronous batch baseline."""
    from cua_rl.bench.fleet import bench
    from cua_rl.rollout.latency import LatencyModel

    if not simulated:
        raise click.UsageError("only --simulated is implemented: pass --simulated")
    if actors < group_size:
        raise click.BadParameter(f"--actors {actors} < --group-size {group_size}")
    model = LatencyModel.load(latency_file)
    figures = asyncio.run(
        bench(model, actors, group_size=group_size, eta=eta, duration_s=duration_s, seed=seed)
    )
    if figures["host_bound"]:
        click.echo(
            "warning: the event loop lagged (loop_lag_ms_p99); the host is loaded or "
            "the time scale too small, so these figures understate the cluster",
            err=True,
        )
    if as_json:
        emit_json({k: round(v, 4) if isinstance(v, float) else v for k, v in figures.items()})
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"simulated fleet, {actors} desktops (steps per simulated second)")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for key, value in figures.items():
        table.add_row(key, f"{value:.3f}" if isinstance(value, float) else str(value))
    Console().print(table)
