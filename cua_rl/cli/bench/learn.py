"""`cua-rl bench learn`: the reward rise of the tiny model trained through the whole
real stack (bench/learn.py measures it)."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("learn")
@click.option(
    "--steps",
    "updates",
    default=30,
    show_default=True,
    help="Policy updates (a step of flat groups only makes none and does not count).",
)
@click.option("--group", default=8, show_default=True, help="Samples per prompt (G).")
@click.option("--actors", default=2, show_default=True, help="Concurrent sampling actors.")
@click.option(
    "--lr",
    default=3e-4,
    show_default=True,
    help="Learning rate (the tiny model needs a large one).",
)
@click.option(
    "--model",
    "model_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Checkpoint to start from (default: the primed tiny model).",
)
@click.option(
    "--max-seconds",
    type=click.FloatRange(min=1),
    default=600.0,
    show_default=True,
    help="Stop sampling after this long even if fewer updates were made.",
)
@click.option(
    "--eta",
    type=click.IntRange(min=0),
    default=2,
    show_default=True,
    help="Staleness bound in updates (samples older are dropped and counted).",
)
@click.option(
    "--batch-groups",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Groups per update (train.tasks_per_update).",
)
@click.option(
    "--aggregation",
    type=click.Choice(["token", "step", "trajectory"]),
    default="step",
    show_default=True,
    help="Loss aggregation (train.*.loss).",
)
@click.option(
    "--seed",
    type=int,
    default=None,
    help="Seed of the learner and of the sampling requests (default: unseeded).",
)
@click.option("--json", "as_json", is_flag=True)
def bench_learn(
    updates: int,
    group: int,
    actors: int,
    lr: float,
    model_dir: Path | None,
    max_seconds: float,
    eta: int,
    batch_groups: int,
    aggregation: str,
    seed: int | None,
    as_json: bool,
) -> None:
    """Reward rise of the tiny model trained through the whole real stack."""
    from cua_rl.bench.learn import measure

    result = measure(
        model_dir,
        updates=updates,
        group=group,
        actors=actors,
        lr=lr,
        max_wall_s=max_seconds,
        eta=eta,
        batch_groups=batch_groups,
        aggregation=aggregation,
        seed=seed,
    )
    if as_json:
        from cua_rl.command_output import emit_json

        emit_json(result)
        return
    for key, value in result.items():
        click.echo(f"{key:>14}: {value:.3f}" if isinstance(value, float) else f"{key:>14}: {value}")
