"""Options shared by the commands that run something (rollout, train, eval, config
show). What the flags mean as config (`flag_overrides`, `resolve_run_config`) is in
runtime/run_config.py; this module only parses them."""

from __future__ import annotations

import difflib
import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from cua_rl.errors import ConfigError
from cua_rl.runtime.run_config import flag_overrides

if TYPE_CHECKING:
    from cua_rl.config import RunConfig

OVERRIDES_HELP = """Overrides: dotted.key=value after the options, applied after the preset and
CONFIG (`cua-rl config show ...` prints the result). Common ones:

\b
  tasks.ids=[ID,...]          run only these tasks
  tasks.split=NAME            a shipped split or a split file
  episode.max_steps=N         step limit of an episode
  fleet.max_groups=N          stop after N task groups
  fleet.group_size=N          rollouts per task group
  desktops.count=N            desktops started (usually = fleet.actors)
  fleet.actors=N              concurrent episodes
  policy.model=PATH|tiny      policy checkpoint (prm.model: the reward model)
  train.max_policy_updates=N  (train) stop after N policy updates
  metrics.status_interval_s=S status line period when not on a terminal

Every key, its type, default and meaning: docs/configuration.md (or
`cua-rl config reference`)."""
"""The epilog of `train`, `rollout` and `eval --help`."""


PROVIDER_TYPES = ("local", "container", "docker", "qemu", "aws")
"""`--provider` values: the `type` tags of desktops.provider."""


def run_options(out_help: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """CONFIG|--preset NAME, --out RUN_DIR, --json, the flags every run command
    shares (--osworld, --pairs, --split, --model, --provider, --cache) and dotted overrides;
    `out_help` says what the command does with an existing run directory (they
    differ). The shared flags reach the command as dotted overrides placed before
    the user's own (so `key=value` still wins); `--cache` sets $CUA_RL_CACHE_DIR,
    which the run and every process it starts read."""

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        command = shared_run_flags(command)  # innermost: OVERRIDES is the last argument
        for option in reversed(
            [
                click.argument("config", required=False),
                click.option("--preset", help="A preset shipped with cua-rl (e.g. quickstart)."),
                click.option(
                    "--out", type=click.Path(file_okay=False, path_type=Path), help=out_help
                ),
                click.option(
                    "--json",
                    "as_json",
                    is_flag=True,
                    help="Print the summary as JSON (the only thing on stdout).",
                ),
            ]
        ):
            command = option(command)
        return command

    return decorate


def shared_run_flags(command: Callable[..., Any]) -> Callable[..., Any]:
    """--osworld, --pairs, --split, --model, --provider, --cache and the dotted
    overrides (last argument): the flags reach `command` as overrides placed before
    the user's own, `--cache` as $CUA_RL_CACHE_DIR (see `run_options`)."""

    @functools.wraps(command)
    def wrapped(
        *args: Any,
        osworld: Path | None,
        pairs: Path | None,
        split: str | None,
        model: str | None,
        provider: str | None,
        cache: Path | None,
        **kwargs: Any,
    ) -> Any:
        if osworld is not None and pairs is not None:
            raise click.UsageError("give --osworld or --pairs, not both")
        flags = flag_overrides(
            osworld=osworld, pairs=pairs, split=split, model=model, provider=provider
        )
        if cache is not None:
            os.environ["CUA_RL_CACHE_DIR"] = str(cache.expanduser().resolve())
        kwargs["overrides"] = (*flags, *kwargs["overrides"])
        return command(*args, **kwargs)

    for option in reversed(
        [
            *task_flags(),
            click.option(
                "--model",
                help="The policy model: a Hugging Face id, a local "
                "folder or `tiny` (sets policy.model).",
            ),
            click.option(
                "--provider",
                type=click.Choice(PROVIDER_TYPES),
                help="Where desktops come from (sets desktops.provider.type; docs/providers.md).",
            ),
            cache_option,
            click.argument("overrides", nargs=-1, type=click.UNPROCESSED),
        ]
    ):
        wrapped = option(wrapped)
    return wrapped


def task_flags() -> list[Callable[[Any], Any]]:
    """`--osworld PATH`, `--pairs DIR` and `--split NAME`: the same flags wherever a
    run reads tasks. A source flag also clears tasks.ids: the ids a preset lists
    belong to its own source (an override `tasks.ids=[...]` still applies)."""
    return [
        click.option(
            "--osworld",
            type=click.Path(file_okay=False, path_type=Path),
            help="An OSWorld checkout (or its evaluation_examples): its tasks "
            "(sets tasks.source=osworld:PATH, tasks.ids=[]).",
        ),
        click.option(
            "--pairs",
            type=click.Path(file_okay=False, path_type=Path),
            help="A pair folder from `cua-rl templates new`: its tasks, variants "
            "and difficulty.json (sets tasks.source=pairs:DIR, tasks.ids=[] and, without "
            "--split, tasks.split=null; "
            "docs/pair-authoring.md).",
        ),
        click.option(
            "--split", help="A shipped split name or a .txt/.json split file (sets tasks.split)."
        ),
    ]


cache_option = click.option(
    "--cache",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Asset cache root [default: $CUA_RL_CACHE_DIR or ~/.cache/cua-rl/files].",
)
"""`--cache`: the same flag on every command that reads the asset cache."""


overwrite_option = click.option(
    "--overwrite",
    is_flag=True,
    help="With --out: delete the run already there and start a fresh one.",
)
"""`--overwrite` of the commands that refuse an existing run (run_dir.py)."""


def load_run_config(
    config: str | None,
    preset: str | None,
    overrides: tuple[str, ...],
    *,
    under: str | None = None,
    fixed: tuple[str, ...] = (),
) -> RunConfig:
    """The RunConfig of a command line (`run_config.resolve_run_config`: defaults
    when neither CONFIG nor --preset is given, `under` a preset below --preset,
    `fixed` settings after CONFIG); a bad file or override is reported, not raised
    as a traceback. A mistyped option (`--ouput`) is a usage error with a "did you
    mean", not a config file that cannot be read: these commands pass unknown
    options through as overrides, so they are caught here."""
    from cua_rl.runtime.run_config import resolve_run_config

    reject_unknown_options((config, *overrides))
    try:
        return resolve_run_config(config, preset, overrides, under=under, fixed=fixed)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc


def reject_unknown_options(words: tuple[str | None, ...]) -> None:
    """Raise click's "No such option" (exit 2, with "Did you mean") for an option-like
    word among CONFIG and the overrides of the current command."""
    ctx = click.get_current_context(silent=True)
    for word in words:
        if not word or not word.startswith("-") or word == "-":
            continue
        name = word.split("=", 1)[0]
        known = (
            []
            if ctx is None
            else sorted(
                {
                    opt
                    for param in ctx.command.params
                    if isinstance(param, click.Option)
                    for opt in (*param.opts, *param.secondary_opts)
                }
            )
        )
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
        raise click.NoSuchOption(name, possibilities=close, ctx=ctx)


def dry_run_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--dry-run and --nodes (runtime/launch_plan.py)."""
    command = click.option(
        "--nodes",
        metavar="SPEC",
        help="With --dry-run: the machines to lay the run out on, e.g. 1x8gpu, 3x8gpu, "
        "1x8gpu,4xcpu:64cpu (first node: the driver's); default: this machine.",
    )(command)
    return click.option(
        "--dry-run",
        is_flag=True,
        help="Print every process the run would start (role, node, GPUs, command, "
        "environment) and start nothing.",
    )(command)


def print_dry_run(cfg: RunConfig, nodes: str | None, as_json: bool) -> None:
    """The launch of `cfg` on `nodes` (runtime/launch_plan.py), as text or JSON."""
    from cua_rl.command_output import emit_json
    from cua_rl.runtime.launch_plan import dry_run, render_dry_run
    from cua_rl.runtime.node_spec import parse_nodes

    plan = dry_run(cfg, parse_nodes(nodes) if nodes else None)
    if as_json:
        emit_json(plan)
    else:
        click.echo(render_dry_run(plan), nl=False)
