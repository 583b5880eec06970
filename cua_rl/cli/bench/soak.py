"""`cua-rl bench soak`: one training run for M minutes under a stream of faults,
watched from outside (bench/soak/runner.py drives it, docs/soak.md defines the
figures)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import click

from cua_rl.command_output import emit_json


@click.command("soak")
@click.option(
    "--minutes",
    type=click.FloatRange(min=0.5),
    required=True,
    help="How long the run trains before it is stopped (SIGTERM).",
)
@click.option(
    "--chaos",
    type=click.FloatRange(min=0),
    default=0.6,
    show_default=True,
    help="Faults injected per minute (0: none), drawn at random.",
)
@click.option(
    "--seed",
    type=int,
    default=0,
    show_default=True,
    help="Seed of the fault schedule and of the run (replays a schedule).",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder for the run, samples.jsonl, soak.json, soak.png "
    "(default: a fresh temporary directory, kept).",
)
@click.option(
    "--engine",
    type=click.Choice(["vllm", "hf"]),
    default="vllm",
    show_default=True,
    help="Both model pools' engine.",
)
@click.option(
    "--window-min",
    type=click.FloatRange(min=0.1),
    default=5.0,
    show_default=True,
    help="Length of a reporting window in minutes.",
)
@click.option(
    "--interval",
    "interval_s",
    type=click.FloatRange(min=0.5),
    default=5.0,
    show_default=True,
    help="Seconds between two resource samples.",
)
@click.option(
    "--faults",
    "kinds",
    default="",
    help="Comma-separated fault kinds to draw from (default: all of "
    "policy_replica_kill, prm_replica_kill, policy_replica_hang, "
    "prm_replica_hang, guest_kill, xvfb_kill, "
    "corrupt_screenshot, fork_loop, disk_fill, memory_hog, malformed_answer, "
    "sigterm_resume).",
)
@click.option(
    "--stop-deadline",
    "stop_deadline_s",
    type=click.FloatRange(min=5),
    default=60.0,
    show_default=True,
    help="Seconds the run has to exit after SIGTERM.",
)
@click.option(
    "--tiny-model-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="The tiny model the run serves and trains (default: the cached one).",
)
@click.option(
    "--runtime",
    type=click.Choice(["local", "ray"]),
    default="local",
    show_default=True,
    help="ray: the run's fleet on a Ray cluster of --nodes "
    "nodes on this machine, faults are fleet node kills (node_kill).",
)
@click.option(
    "--nodes",
    type=click.IntRange(min=2),
    default=3,
    show_default=True,
    help="With --runtime ray: the head plus NODES-1 fleet nodes.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
@click.argument("overrides", nargs=-1)
def bench_soak(
    minutes: float,
    chaos: float,
    seed: int,
    out: Path | None,
    engine: str,
    window_min: float,
    interval_s: float,
    kinds: str,
    stop_deadline_s: float,
    tiny_model_dir: Path | None,
    runtime: str,
    nodes: int,
    as_json: bool,
    overrides: tuple[str, ...],
) -> None:
    """A training run for M minutes under a stream of faults: steady throughput, flat
    memory, nothing lost, nothing left running? OVERRIDES (key=value) go to the run."""
    from cua_rl.bench.soak.injections import LOCAL_KINDS
    from cua_rl.bench.soak.report import summary_lines
    from cua_rl.bench.soak.runner import SoakSpec, run_soak
    from cua_rl.runtime.stoppable import sigterm_as_interrupt

    chosen = [k.strip() for k in kinds.split(",") if k.strip()] or None
    known = ["node_kill"] if runtime == "ray" else LOCAL_KINDS
    unknown = sorted(set(chosen or ()) - set(known))
    if unknown:
        raise click.BadParameter(
            f"unknown fault(s) {unknown}; known: {', '.join(known)}", param_hint="--faults"
        )
    if engine == "vllm":
        from cua_rl.errors import ConfigError
        from cua_rl.inference.vllm_engine import resolve_vllm_python

        try:
            resolve_vllm_python()
        except ConfigError as exc:
            raise click.ClickException(f"{exc} (or pass --engine hf)") from None
    out = out or Path(tempfile.mkdtemp(prefix="cua-rl-soak-"))
    spec = SoakSpec(
        minutes,
        chaos,
        seed,
        out,
        engine,
        window_min,
        interval_s,
        stop_deadline_s,
        tiny_model_dir,
        chosen,
        overrides,
    )
    with sigterm_as_interrupt():  # the run is in its own session: stop it on the way out
        if runtime == "ray":
            from cua_rl.bench.soak.ray_nodes import run_ray_soak

            result = run_ray_soak(
                spec, nodes, run_soak, log=lambda line: click.echo(line, err=True)
            )
        else:
            result = run_soak(spec, log=lambda line: click.echo(line, err=True))
    if as_json:
        emit_json(result)
        return
    click.echo(summary_lines(result))
    click.echo(f"figures: {out / 'soak.json'}; picture: {result['png']}")
