"""`cua-rl vm ...`: start, list, drive and stop desktops by hand.

Thin on purpose: every command builds a provider, calls `cua_rl.desktop.manage`
(or, for `vm sweep`, `cua_rl.desktop.providers.aws.sweep`), prints. Desktops
outlive the command (`vm up` returns while they run); later commands find them
through the provider's state dir.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeVar

import click

from cua_rl.command_output import emit_json
from cua_rl.desktop.manage import (
    act_on,
    list_desktops,
    provider_configs,
    run_closing,
    screenshot_of,
    start_desktops,
    stop_desktops,
)
from cua_rl.desktop.providers.base import DesktopProvider
from cua_rl.errors import ConfigError, CuaRlError

T = TypeVar("T")

REGION_KEY = "cua_rl.region"
"""Where --region waits in the click context (it is not a parameter of the commands)."""


def _provider(name: str, state_dir: Path | None, settings: tuple[str, ...] = ()) -> DesktopProvider:
    """The provider `name` configured by its defaults, --state-dir, --region and
    --set k=v; a flag the provider has no field for is a usage error."""
    model = provider_configs()[name]
    if state_dir is not None and "state_dir" not in model.model_fields:
        raise click.UsageError(f"--state-dir: the {name} provider keeps no state dir")
    ctx = click.get_current_context(silent=True)
    region = ctx.meta.get(REGION_KEY) if ctx is not None else None
    if region is not None and "region" not in model.model_fields:
        raise click.UsageError(f"--region: the {name} provider has no region (aws has)")
    return build_provider(name, state_dir, region, settings)


def build_provider(
    name: str,
    state_dir: Path | None = None,
    region: str | None = None,
    settings: tuple[str, ...] = (),
) -> DesktopProvider:
    """The provider `name` configured by its defaults, a state dir, a region and
    `key=value` settings (its config, docs/providers.md). The caller checks that the
    provider has a state dir or a region before passing one."""
    from pydantic import ValidationError

    from cua_rl.config import apply_override, describe_validation_error
    from cua_rl.desktop.providers.factory import make_provider

    model = provider_configs()[name]
    data: dict[str, Any] = {"type": name}
    if state_dir is not None:
        data["state_dir"] = state_dir
    if region is not None:
        data["region"] = region
    for setting in settings:
        apply_override(data, setting)
    try:
        config = model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(
            f"--provider {name} --set: {describe_validation_error(exc, model)}"
        ) from None
    return make_provider(config)  # type: ignore[arg-type]  # the model validated above is one of the provider configs


def _run(coro_fn: Callable[[DesktopProvider], Awaitable[T]], provider: DesktopProvider) -> T:
    """Run one async command and always close the provider; CuaRlError -> exit 1."""
    try:
        return run_closing(coro_fn, provider)
    except CuaRlError as exc:
        raise click.ClickException(str(exc)) from exc


def _keep_region(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is not None:
        ctx.meta[REGION_KEY] = value


def provider_option(command):  # noqa: ANN001, ANN201 - a click decorator
    """--provider NAME, --region (aws: the name `vm sweep` uses) and --set KEY=VALUE
    (its config, docs/providers.md)."""
    command = click.option(
        "--region",
        expose_value=False,
        callback=_keep_region,
        help="Cloud region of the aws provider (the same as --set region=...).",
    )(command)
    command = click.option(
        "--set",
        "settings",
        multiple=True,
        metavar="KEY=VALUE",
        help="A provider config field (repeatable), e.g. --set region=eu-west-1; "
        "the fields are desktops.provider.* in docs/configuration.md.",
    )(command)
    return click.option(
        "--provider",
        "provider_name",
        type=click.Choice(sorted(provider_configs())),
        default="local",
        show_default=True,
        help="Desktop provider (what each does: docs/providers.md).",
    )(command)


state_option = click.option(
    "--state-dir",
    type=click.Path(path_type=Path),
    default=None,
    help="State dir of the local, container and qemu providers "
    "(default under $CUA_RL_STATE_DIR or ~/.cache/cua-rl).",
)


@click.group()
def vm() -> None:
    """Start, list, drive and stop desktops."""


@vm.command()
@provider_option
@state_option
@click.option("--count", "-n", type=click.IntRange(min=1), default=1, show_default=True)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print a JSON list of {id, url, token, tls_fingerprint, limits}.",
)
def up(
    provider_name: str, settings: tuple[str, ...], state_dir: Path | None, count: int, as_json: bool
) -> None:
    """Start COUNT desktops and leave them running."""
    handles = _run(
        lambda provider: start_desktops(provider, count),
        _provider(provider_name, state_dir, settings),
    )
    if as_json:
        emit_json(
            [
                {
                    "id": h.id,
                    "url": h.url,
                    "token": h.token,
                    "tls_fingerprint": h.tls_fingerprint,
                    "limits": h.info.get("limits"),
                }
                for h in handles
            ]
        )
    else:
        for h in handles:
            details = "  ".join(f"{k}={v}" for k, v in h.info.items())
            click.echo(f"{h.id}  {h.url}  token={h.token}  {details}")


@vm.command(name="list")
@provider_option
@state_option
@click.option("--json", "as_json", is_flag=True)
def list_(
    provider_name: str, settings: tuple[str, ...], state_dir: Path | None, as_json: bool
) -> None:
    """List desktops (also ones started by earlier commands). A local desktop is
    `stale` when its run or its session is gone; `vm down --stale` cleans those up."""
    rows = _run(list_desktops, _provider(provider_name, state_dir, settings))
    if as_json:
        emit_json(rows)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table("id", "url", "owner", "stale", "details")  # details differ by provider
    for row in rows:
        details = "  ".join(
            f"{k}={v}"
            for k, v in row.items()
            if k not in ("id", "url", "token", "owner_pid", "stale")
        )
        table.add_row(
            row["id"],
            row["url"] or "",
            str(row.get("owner_pid") or ""),
            str(row.get("stale", "")),
            details,
        )
    Console().print(table)


@vm.command()
@provider_option
@state_option
@click.argument("desktop_ids", nargs=-1)
@click.option(
    "--all",
    "all_",
    is_flag=True,
    help="Stop every desktop of the provider, except those a live run owns.",
)
@click.option(
    "--stale",
    is_flag=True,
    help="Remove desktops whose run or session is gone (state dirs included).",
)
@click.option("--force", is_flag=True, help="Also stop desktops owned by a live run.")
@click.option("--json", "as_json", is_flag=True, help="Print {stopped: [ids], kept: [reasons]}.")
def down(
    provider_name: str,
    settings: tuple[str, ...],
    state_dir: Path | None,
    desktop_ids: tuple[str, ...],
    all_: bool,
    stale: bool,
    force: bool,
    as_json: bool,
) -> None:
    """Stop desktops by ID (or --all, --stale) and delete their state. Local desktops
    that a live run owns are left alone unless --force: that run would lose them."""
    if not desktop_ids and not all_ and not stale:
        raise click.UsageError("give desktop IDs, --all or --stale")

    stopped, kept = _run(
        lambda provider: stop_desktops(provider, desktop_ids, all_=all_, stale=stale, force=force),
        _provider(provider_name, state_dir, settings),
    )
    if as_json:
        emit_json({"stopped": stopped, "kept": kept})
        return
    for desktop_id in stopped:
        click.echo(f"stopped {desktop_id}")
    for line in kept:
        click.echo(line, err=True)


@vm.command(name="exec")
@provider_option
@state_option
@click.argument("desktop_id")
@click.argument("code")
@click.option("--timeout", type=float, default=10.0, show_default=True)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Accepted for uniformity: the result is always printed as JSON.",
)
def exec_(
    provider_name: str,
    settings: tuple[str, ...],
    state_dir: Path | None,
    desktop_id: str,
    code: str,
    timeout: float,
    as_json: bool,
) -> None:
    """Run pyautogui CODE on a desktop (through /act) and print the result."""
    result = _run(
        lambda provider: act_on(provider, desktop_id, code, timeout),
        _provider(provider_name, state_dir, settings),
    )
    emit_json(
        {
            "status": result.status,
            "output": result.output,
            "error": result.error,
            "returncode": result.returncode,
        }
    )
    if not result.ok:
        sys.exit(1)


@vm.command()
@provider_option
@state_option
@click.argument("desktop_id")
@click.argument("out", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print {path, bytes}.")
def screenshot(
    provider_name: str,
    settings: tuple[str, ...],
    state_dir: Path | None,
    desktop_id: str,
    out: Path,
    as_json: bool,
) -> None:
    """Save a PNG screenshot of a desktop to OUT."""
    data = _run(
        lambda provider: screenshot_of(provider, desktop_id),
        _provider(provider_name, state_dir, settings),
    )
    out.write_bytes(data)
    if as_json:
        emit_json({"path": str(out), "bytes": len(data)})
    else:
        click.echo(f"wrote {out}")


@vm.command(name="sweep")
@click.option(
    "--provider",
    "provider_name",
    type=click.Choice(["aws"]),
    default="aws",
    show_default=True,
    help="Provider whose leaked desktops to terminate.",
)
@click.option(
    "--run",
    "run_id",
    default=None,
    help="Terminate every instance of this (finished or dead) run; without it, "
    "only instances past their cua-rl:expires-at.",
)
@click.option("--region", default="us-east-1", show_default=True)
@click.option("--profile", default=None, help="AWS credentials profile.")
@click.option("--endpoint-url", default=None, help="EC2 endpoint (moto, LocalStack).")
@click.option("--dry-run", is_flag=True, help="List what would be terminated; change nothing.")
@click.option("--json", "as_json", is_flag=True)
def sweep_command(
    provider_name: str,
    run_id: str | None,
    region: str,
    profile: str | None,
    endpoint_url: str | None,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Terminate cloud desktops of dead runs or past their time-to-live."""
    from cua_rl.desktop.providers.aws.sweep import sweep_account

    try:
        swept = asyncio.run(sweep_account(region, profile, endpoint_url, run_id, dry_run=dry_run))
    except CuaRlError as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        emit_json([asdict(s) for s in swept])
        return
    verb = "would terminate" if dry_run else "terminated"
    for s in swept:
        click.echo(f"{verb} {s.instance_id}  run={s.run}  desktop={s.desktop}  ({s.reason})")
    if not swept:
        click.echo("nothing to sweep")
