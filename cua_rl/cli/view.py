"""`cua-rl view RUN_DIR`: serve the trajectory viewer for a run directory."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("view")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to bind (the viewer has no authentication: keep it local).",
)
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True)
def view(run_dir: Path, host: str, port: int) -> None:
    """Browse a run's trajectories, votes and task adaptation (live while it runs).
    RUN_DIR may also be an OSWorld results folder (`cua-rl eval`'s osworld-results/,
    or anyone's published OSWorld trajectories: <domain>/<task_id>/traj.jsonl,
    result.txt and step screenshots, at any level of the tree)."""
    from aiohttp import web

    from cua_rl.viewer.server import make_app

    try:
        app = make_app(run_dir)
    except FileNotFoundError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"viewer for {run_dir.resolve()} on http://{host}:{port}/")
    web.run_app(app, host=host, port=port, print=None)
