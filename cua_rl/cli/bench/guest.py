"""`cua-rl bench guest`: screenshot and action latency of a guest server; the
measuring is `cua_rl.bench.guest`, this module parses the flags and prints."""

from __future__ import annotations

import asyncio

import click

from cua_rl.command_output import emit_json
from cua_rl.errors import CuaRlError


@click.command(name="guest")
@click.option("--url", default=None, help="Measure this guest instead of starting a desktop.")
@click.option("--token", default=None, help="Bearer token of --url.")
@click.option(
    "--tls-fingerprint",
    default=None,
    help="SHA-256 of an https --url's certificate, pinned (docs/security.md).",
)
@click.option(
    "--calls",
    type=click.IntRange(min=20),
    default=20,
    show_default=True,
    help="Calls per figure (medians).",
)
@click.option("--rows", type=click.IntRange(min=1), default=200, show_default=True)
@click.option("--cols", type=click.IntRange(min=1), default=12, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def bench_guest(
    url: str | None,
    token: str | None,
    tls_fingerprint: str | None,
    calls: int,
    rows: int,
    cols: int,
    as_json: bool,
) -> None:
    """Screenshot and action latency of a guest server (docs/figures.md, numbers); the
    JPEG screenshot with each of the guest's encoders (turbo, pillow) in one run."""
    from cua_rl.bench.guest import bench_local, bench_remote

    try:
        figures = asyncio.run(
            bench_remote(url, token, tls_fingerprint, calls)
            if url
            else bench_local(calls, rows, cols)
        )
    except CuaRlError as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        emit_json(figures)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table("figure", "value", title=f"guest {url or '(local desktop + Calc)'}")
    for key, value in flat(figures).items():
        table.add_row(key, str(value))
    Console().print(table)


def flat(figures: dict, prefix: str = "") -> dict[str, object]:
    """Nested figures as dotted keys (`jpeg.turbo.screenshot_ms`), for the table."""
    out: dict[str, object] = {}
    for key, value in figures.items():
        if isinstance(value, dict):
            out.update(flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out
