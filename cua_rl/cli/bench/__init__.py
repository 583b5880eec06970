"""`cua-rl bench`: benchmarks that print figures; one module per benchmark, imported
only when it runs."""

from __future__ import annotations

import click

from cua_rl.cli.lazy_group import LazyGroup

BENCH_COMMANDS: dict[str, str] = {
    "guest": "cua_rl.cli.bench.guest:bench_guest",
    "desktops": "cua_rl.cli.bench.desktops:bench_desktops",
    "learn": "cua_rl.learner.bench_learn:bench_learn",
    "fleet": "cua_rl.rollout.bench_fleet:bench_fleet",
    "inference": "cua_rl.inference.bench_inference:bench_inference",
    "faults": "cua_rl.runtime.bench_faults:bench_faults",
    "sync": "cua_rl.learner.bench_sync:bench_sync",
    "loop": "cua_rl.runtime.bench_loop:bench_loop",
    "soak": "cua_rl.runtime.bench_soak:bench_soak",
}


@click.group(cls=LazyGroup, lazy=BENCH_COMMANDS)
def bench() -> None:
    """Benchmarks that print figures (timing goals live here, not in tests)."""
