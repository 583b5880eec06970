"""`cua-rl cache ...`: the host's asset cache (see `cua_rl.desktop.file_cache`)."""

from __future__ import annotations

from pathlib import Path

import click

from cua_rl.command_output import emit_json
from cua_rl.desktop.cache_seed import seed_from_dir
from cua_rl.desktop.file_cache import FileCache, default_cache_root
from cua_rl.errors import TaskFormatError


@click.group()
def cache() -> None:
    """Seed and inspect the asset cache that task setups and evaluators read."""


@cache.command("seed")
@click.option(
    "--from",
    "source",
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Directory with the files (a hub snapshot of the asset dataset, the URL "
    "paths, or files by name).",
)
@click.option(
    "--osworld",
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="OSWorld checkout whose tasks name the asset URLs.",
)
@click.option(
    "--cache",
    "cache_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Cache root [default: $CUA_RL_CACHE_DIR or ~/.cache/cua-rl/files].",
)
@click.option("--json", "as_json", is_flag=True)
def seed(source: Path, osworld: Path, cache_dir: Path | None, as_json: bool) -> None:
    """Copy every asset of the task set found under --from into the cache."""
    from cua_rl.tasks.preflight import task_needs
    from cua_rl.tasks.sources import load_source

    try:
        load = load_source(f"osworld:{osworld}")
    except TaskFormatError as exc:
        raise click.ClickException(str(exc)) from exc
    urls = [url for task in load.tasks for url in task_needs(task).assets]
    target = FileCache(cache_dir or default_cache_root())
    result = seed_from_dir(target, urls, source)
    summary = {
        "cache": str(target.root),
        "seeded": len(result.seeded),
        "already": len(result.already),
        "missing": len(result.missing),
    }
    if as_json:
        emit_json({**summary, "missing_urls": result.missing})
        return
    for url in result.missing:
        click.echo(f"missing: {url}")
    click.echo("  ".join(f"{k}={v}" for k, v in summary.items()), err=True)
