"""`cua-rl bench faults`: inject each fault class into a real short run and print
what the run made of it (bench/faults/runner.py runs them)."""

from __future__ import annotations

from pathlib import Path

import click

from cua_rl.command_output import emit_json


@click.command("faults")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
@click.option("--only", default="", help="Comma-separated fault names (default: all).")
@click.option(
    "--deadline",
    type=click.FloatRange(min=30),
    default=300.0,
    show_default=True,
    help="Seconds one run may take before it counts as hung (and is killed).",
)
@click.option(
    "--work-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where the runs go (default: a fresh temporary directory, kept).",
)
def bench_faults(as_json: bool, only: str, deadline: float, work_dir: Path | None) -> None:
    """Kill replicas and guests, answer badly, hang, SIGKILL/SIGTERM, fill the disk:
    does a real run survive each, and what does it lose?"""
    from cua_rl.bench.faults.catalog import FAULTS
    from cua_rl.bench.faults.runner import run_faults
    from cua_rl.runtime.stoppable import sigterm_as_interrupt

    names = [n.strip() for n in only.split(",") if n.strip()] or list(FAULTS)
    unknown = sorted(set(names) - set(FAULTS))
    if unknown:
        raise click.BadParameter(
            f"unknown fault(s) {unknown}; known: {', '.join(FAULTS)}", param_hint="--only"
        )
    with sigterm_as_interrupt():  # its cleanup (model servers, runs) runs on SIGTERM too
        work_dir, results = run_faults(
            names, deadline, work_dir, log=lambda line: click.echo(line, err=True)
        )
    if as_json:
        emit_json({"faults": results, "work_dir": str(work_dir)})
        return
    for r in results:
        click.echo(
            f"{r['name']:32} survived={r['survived']!s:5} lost={r['trajectories_lost']} "
            f"dup_updates={r['updates_duplicated']} aborted={r['episodes_aborted']} "
            f"recover_s={r['recover_s']}" + (f"  ({r['why']})" if "why" in r else "")
        )
