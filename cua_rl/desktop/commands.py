"""`cua-rl vm ...`: start, list, drive and stop desktops by hand.

Thin on purpose: every command builds a provider, calls it, prints. Desktops
outlive the command (`vm up` returns while they run); later commands find them
through the provider's state dir.
"""

from __future__ import annotations

import asyncio
import secrets
import sys
import typing
from pathlib import Path

import click
from pydantic import BaseModel

from cua_rl.command_output import emit_json
from cua_rl.desktop.client import GuestClient
from cua_rl.desktop.providers.base import DesktopHandle, DesktopProvider
from cua_rl.desktop.providers.config import ProviderConfig
from cua_rl.errors import ConfigError, CuaRlError


def provider_configs() -> dict[str, type[BaseModel]]:
    """type -> config model of every provider (the members of `ProviderConfig`), so a
    new provider is offered here as soon as it joins the union."""
    union = typing.get_args(ProviderConfig)[0]
    return {typing.get_args(m.model_fields["type"].annotation)[0]: m
            for m in typing.get_args(union)}


def _provider(name: str, state_dir: Path | None, settings: tuple[str, ...] = ()
              ) -> DesktopProvider:
    """The provider `name` configured by its defaults, --state-dir and --set k=v."""
    from pydantic import ValidationError

    from cua_rl.config import apply_override, describe_validation_error
    from cua_rl.desktop.providers.factory import make_provider

    model = provider_configs()[name]
    data: dict = {"type": name}
    if state_dir is not None:
        if "state_dir" not in model.model_fields:
            raise click.UsageError(f"--state-dir: the {name} provider keeps no state dir")
        data["state_dir"] = state_dir
    ctx = click.get_current_context(silent=True)
    region = ctx.meta.get(REGION_KEY) if ctx is not None else None
    if region is not None:
        if "region" not in model.model_fields:
            raise click.UsageError(f"--region: the {name} provider has no region (aws has)")
        data["region"] = region
    for setting in settings:
        apply_override(data, setting)
    try:
        config = model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"--provider {name} --set: "
                          f"{describe_validation_error(exc, model)}") from None
    return make_provider(config)  # type: ignore[arg-type]


def _run(coro_fn, provider: DesktopProvider):
    """Run one async command and always close the provider; CuaRlError -> exit 1."""

    async def main():
        try:
            return await coro_fn(provider)
        finally:
            await provider.close()

    try:
        return asyncio.run(main())
    except CuaRlError as exc:
        raise click.ClickException(str(exc)) from exc


def _as_dict(handle: DesktopHandle) -> dict:
    return {"id": handle.id, "url": handle.url, "token": handle.token,
            "tls_fingerprint": handle.tls_fingerprint, **handle.info}


REGION_KEY = "cua_rl.region"


def _keep_region(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is not None:
        ctx.meta[REGION_KEY] = value


def provider_option(command):  # noqa: ANN001, ANN201 - a click decorator
    """--provider NAME, --region (aws: the name `vm sweep` uses) and --set KEY=VALUE
    (its config, docs/providers.md)."""
    command = click.option(
        "--region", expose_value=False, callback=_keep_region,
        help="Cloud region of the aws provider (the same as --set region=...).")(command)
    command = click.option(
        "--set", "settings", multiple=True, metavar="KEY=VALUE",
        help="A provider config field (repeatable), e.g. --set region=eu-west-1; "
             "the fields are desktops.provider.* in docs/configuration.md.")(command)
    return click.option(
        "--provider", "provider_name", type=click.Choice(sorted(provider_configs())),
        default="local", show_default=True,
        help="Desktop provider (what each does: docs/providers.md).")(command)


state_option = click.option("--state-dir", type=click.Path(path_type=Path), default=None,
                            help="State dir of the local, container and qemu providers "
                                 "(default under $CUA_RL_STATE_DIR or ~/.cache/cua-rl).")


@click.group()
def vm() -> None:
    """Start, list, drive and stop desktops."""


@vm.command()
@provider_option
@state_option
@click.option("--count", "-n", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--json", "as_json", is_flag=True,
              help="Print a JSON list of {id, url, token, tls_fingerprint, limits}.")
def up(provider_name: str, settings: tuple[str, ...], state_dir: Path | None, count: int,
       as_json: bool) -> None:
    """Start COUNT desktops and leave them running."""
    prefix = f"vm-{secrets.token_hex(3)}"

    async def go(provider: DesktopProvider) -> list[DesktopHandle]:
        results = await asyncio.gather(
            *(provider.start(f"{prefix}-{i}") for i in range(count)), return_exceptions=True
        )
        handles = [r for r in results if isinstance(r, DesktopHandle)]
        failed = [r for r in results if isinstance(r, BaseException)]
        if failed:  # all or nothing: a half-started fleet is harder to clean up
            await asyncio.gather(*(provider.stop(h) for h in handles))
            raise failed[0]
        return handles

    handles = _run(go, _provider(provider_name, state_dir, settings))
    if as_json:
        emit_json([{"id": h.id, "url": h.url, "token": h.token,
                    "tls_fingerprint": h.tls_fingerprint,
                    "limits": h.info.get("limits")} for h in handles])
    else:
        for h in handles:
            details = "  ".join(f"{k}={v}" for k, v in h.info.items())
            click.echo(f"{h.id}  {h.url}  token={h.token}  {details}")


def _states(provider: DesktopProvider) -> list:
    """Every desktop dir of a local provider, with owner and staleness (other
    providers keep no host state dirs: none)."""
    from cua_rl.desktop.providers import local_state as st
    from cua_rl.desktop.providers.local import LocalProvider, record_alive

    if not isinstance(provider, LocalProvider):
        return []
    return st.desktop_states(provider.state_dir, record_alive)


@vm.command(name="list")
@provider_option
@state_option
@click.option("--json", "as_json", is_flag=True)
def list_(provider_name: str, settings: tuple[str, ...], state_dir: Path | None,
          as_json: bool) -> None:
    """List desktops (also ones started by earlier commands). A local desktop is
    `stale` when its run or its session is gone; `vm down --stale` cleans those up."""

    async def go(provider: DesktopProvider) -> list[dict]:
        handles = {h.id: _as_dict(h) for h in await provider.list()}
        rows = []
        for state in _states(provider):
            row = handles.pop(state.id, None) or {"id": state.id, "url": None, "alive": False}
            rows.append({**row, "owner_pid": state.owner_pid, "stale": state.stale})
        return rows + list(handles.values())

    rows = _run(go, _provider(provider_name, state_dir, settings))
    if as_json:
        emit_json(rows)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table("id", "url", "owner", "stale", "details")  # details differ by provider
    for row in rows:
        details = "  ".join(f"{k}={v}" for k, v in row.items()
                            if k not in ("id", "url", "token", "owner_pid", "stale"))
        table.add_row(row["id"], row["url"] or "", str(row.get("owner_pid") or ""),
                      str(row.get("stale", "")), details)
    Console().print(table)


@vm.command()
@provider_option
@state_option
@click.argument("desktop_ids", nargs=-1)
@click.option("--all", "all_", is_flag=True,
              help="Stop every desktop of the provider, except those a live run owns.")
@click.option("--stale", is_flag=True,
              help="Remove desktops whose run or session is gone (state dirs included).")
@click.option("--force", is_flag=True, help="Also stop desktops owned by a live run.")
@click.option("--json", "as_json", is_flag=True,
              help="Print {stopped: [ids], kept: [reasons]}.")
def down(provider_name: str, settings: tuple[str, ...], state_dir: Path | None,
         desktop_ids: tuple[str, ...], all_: bool, stale: bool, force: bool,
         as_json: bool) -> None:
    """Stop desktops by ID (or --all, --stale) and delete their state. Local desktops
    that a live run owns are left alone unless --force: that run would lose them."""
    if not desktop_ids and not all_ and not stale:
        raise click.UsageError("give desktop IDs, --all or --stale")

    async def go(provider: DesktopProvider) -> tuple[list[str], list[str]]:
        states = {s.id: s for s in _states(provider)}
        if all_:
            ids = [h.id for h in await provider.list()]
        elif stale:
            ids = [i for i, s in states.items() if s.stale]
        else:
            ids = list(desktop_ids)
        kept = [] if force else [
            f"kept {i}: owned by the live run pid {states[i].owner_pid} (--force stops it)"
            for i in ids if i in states and states[i].owner_alive]
        ids = [i for i in ids if force or i not in states or not states[i].owner_alive]
        if not stale:  # named or listed desktops must exist (a typo is an error)
            handles = [await provider.get(i) for i in ids]
        if hasattr(provider, "stop_id"):  # local: also removes a stale desktop's state
            await asyncio.gather(*(provider.stop_id(i) for i in ids))
        else:
            await asyncio.gather(*(provider.stop(h) for h in handles))
        return ids, kept

    stopped, kept = _run(go, _provider(provider_name, state_dir, settings))
    if as_json:
        emit_json({"stopped": stopped, "kept": kept})
        return
    for desktop_id in stopped:
        click.echo(f"stopped {desktop_id}")
    for line in kept:
        click.echo(line, err=True)


async def _client(provider: DesktopProvider, desktop_id: str) -> GuestClient:
    handle = await provider.get(desktop_id)
    return handle.guest_client()


@vm.command(name="exec")
@provider_option
@state_option
@click.argument("desktop_id")
@click.argument("code")
@click.option("--timeout", type=float, default=10.0, show_default=True)
@click.option("--json", "as_json", is_flag=True,
              help="Accepted for uniformity: the result is always printed as JSON.")
def exec_(provider_name: str, settings: tuple[str, ...], state_dir: Path | None,
          desktop_id: str, code: str, timeout: float, as_json: bool) -> None:
    """Run pyautogui CODE on a desktop (through /act) and print the result."""

    async def go(provider: DesktopProvider):
        async with await _client(provider, desktop_id) as client:
            return await client.act(code, timeout=timeout)

    result = _run(go, _provider(provider_name, state_dir, settings))
    emit_json({"status": result.status, "output": result.output,
               "error": result.error, "returncode": result.returncode})
    if not result.ok:
        sys.exit(1)


@vm.command()
@provider_option
@state_option
@click.argument("desktop_id")
@click.argument("out", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print {path, bytes}.")
def screenshot(provider_name: str, settings: tuple[str, ...], state_dir: Path | None,
               desktop_id: str, out: Path, as_json: bool) -> None:
    """Save a PNG screenshot of a desktop to OUT."""

    async def go(provider: DesktopProvider) -> bytes:
        async with await _client(provider, desktop_id) as client:
            return await client.screenshot("png")

    data = _run(go, _provider(provider_name, state_dir, settings))
    out.write_bytes(data)
    if as_json:
        emit_json({"path": str(out), "bytes": len(data)})
    else:
        click.echo(f"wrote {out}")


from cua_rl.desktop.providers.aws_sweep import sweep_command  # noqa: E402

vm.add_command(sweep_command)
