"""`cua-rl bench sync`: what a weight sync costs the requests that meet it
(bench/sync.py measures it)."""

from __future__ import annotations

import click


@click.command("sync")
@click.option("--replicas", default=2, show_default=True)
@click.option("--syncs", default=3, show_default=True)
@click.option("--clients", default=4, show_default=True)
@click.option(
    "--staggered/--no-staggered",
    default=True,
    show_default=True,
    help="train.sync.staggered: take the replica under update out of routing",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def bench_sync(replicas: int, syncs: int, clients: int, staggered: bool, as_json: bool) -> None:
    """How long requests routed to a replica under update wait (real hf replicas, tiny model)."""
    from cua_rl.bench.sync import measure
    from cua_rl.command_output import emit_json

    result = measure(replicas=replicas, syncs=syncs, clients=clients, staggered=staggered)
    if as_json:
        emit_json(result)
        return
    for key, value in result.items():
        click.echo(f"{key:>20}: {value}")
