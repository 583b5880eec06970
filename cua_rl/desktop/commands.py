"""`cua-rl vm ...`: start, list, drive and stop desktops by hand.

Thin on purpose: every command builds a provider, calls it, prints. Desktops
outlive the command (`vm up` returns while they run); later commands find them
through the provider's state dir.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import sys
from pathlib import Path

import click

from cua_rl.desktop.client import GuestClient
from cua_rl.desktop.providers.base import DesktopHandle, DesktopProvider
from cua_rl.errors import CuaRlError

PROVIDERS = click.Choice(["local"])


def _provider(name: str, state_dir: Path | None) -> DesktopProvider:
    from cua_rl.desktop.providers.local import LocalProvider
    from cua_rl.desktop.providers.local_config import LocalProviderConfig

    assert name == "local"
    config = LocalProviderConfig(**({"state_dir": state_dir} if state_dir else {}))
    return LocalProvider(config)


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


provider_option = click.option("--provider", "provider_name", type=PROVIDERS, default="local",
                               show_default=True, help="Desktop provider.")
state_option = click.option("--state-dir", type=click.Path(path_type=Path), default=None,
                            help="State dir (default $CUA_RL_STATE_DIR or "
                                 "~/.cache/cua-rl/desktops).")


@click.group()
def vm() -> None:
    """Start, list, drive and stop desktops."""


@vm.command()
@provider_option
@state_option
@click.option("--count", "-n", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of {id, url, token}.")
def up(provider_name: str, state_dir: Path | None, count: int, as_json: bool) -> None:
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

    handles = _run(go, _provider(provider_name, state_dir))
    if as_json:
        click.echo(json.dumps([{"id": h.id, "url": h.url, "token": h.token,
                                "tls_fingerprint": h.tls_fingerprint} for h in handles]))
    else:
        for h in handles:
            click.echo(f"{h.id}  {h.url}  token={h.token}  display={h.info.get('display')}")


def _states(provider: DesktopProvider) -> list:
    """Every desktop dir of a local provider, with owner and staleness."""
    from cua_rl.desktop.providers import local_state as st
    from cua_rl.desktop.providers.local import LocalProvider, record_alive

    assert isinstance(provider, LocalProvider)
    return st.desktop_states(provider.state_dir, record_alive)


@vm.command(name="list")
@provider_option
@state_option
@click.option("--json", "as_json", is_flag=True)
def list_(provider_name: str, state_dir: Path | None, as_json: bool) -> None:
    """List desktops (also ones started by earlier commands). A desktop is `stale`
    when its run or its session is gone; `vm down --stale` cleans those up."""

    async def go(provider: DesktopProvider) -> list[dict]:
        handles = {h.id: _as_dict(h) for h in await provider.list()}
        rows = []
        for state in _states(provider):
            row = handles.get(state.id) or {"id": state.id, "url": None, "alive": False}
            rows.append({**row, "owner_pid": state.owner_pid, "stale": state.stale})
        return rows

    rows = _run(go, _provider(provider_name, state_dir))
    if as_json:
        click.echo(json.dumps(rows))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table("id", "url", "display", "alive", "pid", "owner", "stale")
    for row in rows:
        table.add_row(row["id"], row["url"] or "", str(row.get("display", "")),
                      str(row["alive"]), str(row.get("pid", "")),
                      str(row["owner_pid"] or ""), row["stale"])
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
def down(provider_name: str, state_dir: Path | None, desktop_ids: tuple[str, ...],
         all_: bool, stale: bool, force: bool) -> None:
    """Stop desktops by ID (or --all, --stale) and delete their state. Desktops that
    a live run owns are left alone unless --force: that run would lose them."""
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
            for i in ids:
                await provider.get(i)
        await asyncio.gather(*(provider.stop_id(i) for i in ids))  # type: ignore[attr-defined]
        return ids, kept

    stopped, kept = _run(go, _provider(provider_name, state_dir))
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
def exec_(provider_name: str, state_dir: Path | None, desktop_id: str, code: str,
          timeout: float) -> None:
    """Run pyautogui CODE on a desktop (through /act) and print the result."""

    async def go(provider: DesktopProvider):
        async with await _client(provider, desktop_id) as client:
            return await client.act(code, timeout=timeout)

    result = _run(go, _provider(provider_name, state_dir))
    click.echo(json.dumps({"status": result.status, "output": result.output,
                           "error": result.error, "returncode": result.returncode}))
    if not result.ok:
        sys.exit(1)


@vm.command()
@provider_option
@state_option
@click.argument("desktop_id")
@click.argument("out", type=click.Path(dir_okay=False, path_type=Path))
def screenshot(provider_name: str, state_dir: Path | None, desktop_id: str, out: Path) -> None:
    """Save a PNG screenshot of a desktop to OUT."""

    async def go(provider: DesktopProvider) -> bytes:
        async with await _client(provider, desktop_id) as client:
            return await client.screenshot("png")

    out.write_bytes(_run(go, _provider(provider_name, state_dir)))
    click.echo(f"wrote {out}")


from cua_rl.desktop.providers.aws_sweep import sweep_command  # noqa: E402

vm.add_command(sweep_command)
