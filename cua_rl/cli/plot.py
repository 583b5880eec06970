"""`cua-rl plot RUN_DIR --out DIR`: learning curves of a run as PNG files (per-trajectory
points and a trailing mean whose window the legend names)."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("plot")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Directory for the PNG files (created if missing).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def plot(run_dir: Path, out_dir: Path, as_json: bool) -> None:
    """Plot success rate, step reward, PRM agreement, staleness and throughput."""
    from cua_rl.report.curves import write_curves  # matplotlib only when plotting

    try:
        result = write_curves(run_dir, out_dir)
    except FileNotFoundError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        from cua_rl.command_output import emit_json

        emit_json(
            {"written": {k: str(v) for k, v in result.written.items()}, "skipped": result.skipped}
        )
        return
    for name, path in result.written.items():
        click.echo(f"wrote {name}: {path}")
    for name, why in result.skipped.items():
        click.echo(f"skipped {name}: {why}")
