"""`cua-rl bench`: benchmarks that print figures; one module per benchmark, imported
only when it runs."""

from __future__ import annotations

import click

from cua_rl.cli.lazy_group import LazyGroup

BENCH_COMMANDS: dict[str, str] = {
    "guest": "cua_rl.cli.bench.guest:bench_guest",
    "desktops": "cua_rl.cli.bench.desktops:bench_desktops",
    "learn": "cua_rl.cli.bench.learn:bench_learn",
    "fleet": "cua_rl.cli.bench.fleet:bench_fleet",
    "inference": "cua_rl.cli.bench.inference:bench_inference",
    "faults": "cua_rl.cli.bench.faults:bench_faults",
    "sync": "cua_rl.cli.bench.sync:bench_sync",
    "weight-sync": "cua_rl.cli.bench.weight_sync:bench_weight_sync",
    "loop": "cua_rl.cli.bench.loop:bench_loop",
    "soak": "cua_rl.cli.bench.soak:bench_soak",
}


@click.group(cls=LazyGroup, lazy=BENCH_COMMANDS)
def bench() -> None:
    """Benchmarks that print figures (timing goals live here, not in tests)."""
