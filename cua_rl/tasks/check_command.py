"""`cua-rl tasks check`: which tasks of an OSWorld checkout can run here, and
what stops the others (see `cua_rl.tasks.preflight`).

Per task one line on stdout (`id  domain  runnable | reason: detail`), or with
`--json` the summary `{"total", "runnable", "not_runnable": {reason: [ids]}}`;
the runnable ids are written as a split file that `--split` accepts.
"""

from __future__ import annotations

from pathlib import Path

import click

from cua_rl.command_output import emit_json
from cua_rl.desktop.file_cache import FileCache, default_cache_root
from cua_rl.errors import TaskFormatError
from cua_rl.tasks.preflight import capabilities_for, describe, preflight
from cua_rl.tasks.sources import load_source

PROVIDERS = ("local", "container", "docker", "qemu", "aws")


def write_split(path: Path, ids: list[str], header: str) -> None:
    """A split file (one id per line, `#` comments) of the runnable tasks."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"# {line}\n" for line in header.splitlines())
                    + "".join(f"{i}\n" for i in ids))


@click.command("check")
@click.option("--osworld", "osworld", required=True,
              type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="OSWorld checkout (or its evaluation_examples).")
@click.option("--provider", type=click.Choice(PROVIDERS), default="local", show_default=True)
@click.option("--cache", "cache_dir", type=click.Path(file_okay=False, path_type=Path),
              default=None, help="Asset cache root [default: $CUA_RL_CACHE_DIR or "
              "~/.cache/cua-rl/files].")
@click.option("--split", default=None, help="Check only this split's tasks.")
@click.option("--write-split", "split_out", type=click.Path(dir_okay=False, path_type=Path),
              default=Path("runnable.txt"), show_default=True,
              help="Where to write the runnable task ids (a split file).")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON summary only.")
@click.option("--on-desktop", is_flag=True,
              help="Also run the setup of every runnable task on local desktops and report "
              "setups that fail or leave a blank first screen.")
@click.option("--desktops", type=click.IntRange(1, 8), default=1, show_default=True,
              help="Local desktops for --on-desktop.")
@click.option("--sample", type=click.IntRange(1), default=None,
              help="With --on-desktop: only a stratified sample of this many tasks at most "
              "(every domain and setup-step kind).")
@click.option("--noop-agent", "--noop", "noop", is_flag=True,
              help="With --on-desktop: also score the untouched desktop for a no-op agent, "
              "once declaring success (must score 0 on every task) and once failure (must "
              "score 1 on exactly the infeasible ones); offenders by task id in the JSON. "
              "Exits with status 1 when there is an offender.")
def check_tasks(osworld: Path, provider: str, cache_dir: Path | None, split: str | None,
                split_out: Path, as_json: bool, on_desktop: bool, desktops: int,
                sample: int | None, noop: bool) -> None:
    """Per task: what it needs (assets uncached, apps missing, credentials, root,
    the internet) and whether it can run on PROVIDER's desktops here."""
    try:
        load = load_source(f"osworld:{osworld}", split)
    except TaskFormatError as exc:
        raise click.ClickException(str(exc)) from exc
    cache = FileCache(cache_dir or default_cache_root())
    result = preflight(load.tasks, capabilities_for(provider), cache, load.unimplemented)
    write_split(split_out, result.runnable,
                f"Tasks of {osworld} runnable on the {provider} provider "
                f"(cua-rl tasks check, cache {cache.root}).")
    summary = result.summary()
    if on_desktop:
        if provider != "local":
            raise click.UsageError("--on-desktop runs local desktops: use --provider local")
        summary["on_desktop"] = _on_desktop(
            [t for t in load.tasks if t.task_id in set(result.runnable)], cache, desktops,
            sample, noop, quiet=as_json)
    offenders = summary.get("on_desktop", {}).get("noop_agent", {}).get("offenders", {})
    if as_json:
        emit_json(summary)
        _exit_on_offenders(offenders)
        return
    for task in load.tasks:
        state = result.details.get(task.task_id, "runnable")
        click.echo(f"{task.task_id}  {task.domain}  {state}  "
                   f"{describe(result.needs[task.task_id])}")
    counts = ", ".join(f"{r} {len(ids)}" for r, ids in result.not_runnable.items())
    click.echo(f"{len(result.runnable)} of {result.total} runnable on {provider}"
               + (f"; not runnable: {counts}" if counts else "")
               + f"; split written to {split_out}", err=True)
    _exit_on_offenders(offenders)


def _exit_on_offenders(offenders: dict[str, str]) -> None:
    """A no-op agent check with offenders fails the command, so scripts and CI notice."""
    if offenders:
        click.echo(f"no-op agent check: {len(offenders)} offender(s): "
                   + ", ".join(sorted(offenders)), err=True)
        raise SystemExit(1)


def _on_desktop(tasks: list, cache: FileCache, desktops: int, sample: int | None,
                noop: bool, quiet: bool) -> dict:
    """Run the setups (see `cua_rl.tasks.setup_check`); the summary of the outcomes."""
    import asyncio

    from cua_rl.desktop.providers.local import LocalProvider
    from cua_rl.tasks.noop_check import noop_report
    from cua_rl.tasks.setup_check import check_setups, stratified_sample

    chosen = stratified_sample(tasks, sample) if sample else tasks

    def show(outcome) -> None:
        if not quiet:
            state = ("ok" if outcome.ok else f"setup failed: {outcome.error}" if outcome.error
                     else "blank first screen")
            noop = outcome.noop
            scored = "" if noop is None else "  no-op agent: " + (
                f"apart, the expected file is a downloaded stand-in: {noop.apart_reason}"
                if noop.standin_apart else noop.wrong or "right")
            click.echo(f"{outcome.task_id}  {outcome.domain}  on desktop: {state}  "
                       f"({outcome.seconds:.1f} s){scored}")

    async def run() -> list:
        provider = LocalProvider()
        try:
            return await check_setups(chosen, provider, cache, desktops=desktops,
                                      score_noop=noop, on_outcome=show)
        finally:
            await provider.close()

    outcomes = asyncio.run(run())
    return {"checked": len(outcomes), "ok": sum(o.ok for o in outcomes),
            "setup_failed": {o.task_id: o.error for o in outcomes if o.error},
            "blank": [o.task_id for o in outcomes if o.blank],
            **({"noop_agent": noop_report([o.noop for o in outcomes if o.noop is not None])}
               if noop else {})}
