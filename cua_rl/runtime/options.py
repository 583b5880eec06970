"""Options shared by the commands that run something (rollout, train, eval)."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import click

from cua_rl.errors import ConfigError

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


def run_options(out_help: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """CONFIG|--preset NAME, --out RUN_DIR, --json and dotted overrides; `out_help`
    says what the command does with an existing run directory (they differ)."""

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed([
            click.argument("config", required=False),
            click.option("--preset", help="A preset shipped with cua-rl (e.g. quickstart)."),
            click.option("--out", type=click.Path(file_okay=False, path_type=Path),
                         help=out_help),
            click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON."),
            click.argument("overrides", nargs=-1, type=click.UNPROCESSED),
        ]):
            command = option(command)
        return command

    return decorate


overwrite_option = click.option(
    "--overwrite", is_flag=True,
    help="With --out: delete the run already there and start a fresh one.")
"""`--overwrite` of the commands that refuse an existing run (run_dir.py)."""


def load_run_config(config: str | None, preset: str | None, overrides: tuple[str, ...]):
    """The RunConfig of a command line (defaults when neither CONFIG nor --preset
    is given); a bad file or override is reported, not raised as a traceback."""
    from cua_rl.config import RunConfig, load_config

    if config and "=" in config:  # an override given without a config file
        overrides, config = (config, *overrides), None
    try:
        return load_config(RunConfig, config, preset=preset, overrides=overrides)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc


T = TypeVar("T")


def run_stoppable(coro: Coroutine[Any, Any, T]) -> T:
    """asyncio.run, with SIGTERM cancelling the run like Ctrl-C does: cancellation
    unwinds every context manager, so model servers and desktops are stopped and
    everything stored so far stays usable for `--resume`."""

    async def main() -> T:
        task = asyncio.current_task()
        assert task is not None
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
        return await coro

    try:
        return asyncio.run(main())
    except (KeyboardInterrupt, asyncio.CancelledError):
        raise RunInterrupted("interrupted; run the same command with --resume "
                             "(train) or again (eval) to continue") from None


class RunInterrupted(click.ClickException):
    """Ctrl-C or SIGTERM stopped the run (not a failure: the store records it so)."""

    interrupted = True


def new_run_dir(kind: str) -> Path:
    return Path("runs") / f"{kind}-{time.strftime('%Y%m%d-%H%M%S')}"
