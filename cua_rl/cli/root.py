"""The `cua-rl` root group: subcommands imported only when run, and the one place
where errors become messages.

Each top-level verb has its module in this package (`COMMANDS`), imported only
when that verb runs, so `cua-rl --help` stays fast and never imports torch.
"""

from __future__ import annotations

import os

import click

from cua_rl.cli.lazy_group import LazyGroup
from cua_rl.run_logging import LEVELS, configure

# name -> "module:attribute" of a click command or group.
COMMANDS: dict[str, str] = {
    "vm": "cua_rl.cli.vm:vm",
    "bench": "cua_rl.cli.bench:bench",
    "tasks": "cua_rl.cli.tasks:tasks",
    "templates": "cua_rl.cli.templates:templates",
    "tiny-model": "cua_rl.cli.tiny_model:tiny_model",
    "serve": "cua_rl.cli.serve:serve",
    "runs": "cua_rl.cli.runs:runs",
    "rollout": "cua_rl.cli.rollout:rollout",
    "train": "cua_rl.cli.train:train",
    "eval": "cua_rl.cli.eval:eval_command",
    "eval-prm": "cua_rl.cli.eval_prm:eval_prm",
    "experiment": "cua_rl.cli.experiment:experiment",
    "view": "cua_rl.cli.view:view",
    "plot": "cua_rl.cli.plot:plot",
    "config": "cua_rl.cli.config:config",
    "cache": "cua_rl.cli.cache:cache",
    "image": "cua_rl.cli.image:image",
    "export": "cua_rl.cli.export:export",
}


OWN_JSON_WRITERS: frozenset[str] = frozenset()
"""Commands that print their --json result themselves (none now: every one goes
through `command_output.emit_json`); the root group leaves their stdout alone."""


class RootGroup(LazyGroup):
    """The `cua-rl` group: the ONE place where errors become messages.

    Whatever a subcommand raises passes through `errors.user_message`:
    our own errors and OS refusals (full disk, read-only, permission, port in use)
    become one `Error: ...` line and exit status 1; anything else is a bug and
    keeps its traceback. Commands therefore raise typed errors and never catch
    them only to print them.
    """

    def invoke(self, ctx: click.Context):  # noqa: ANN201 - click's own signature
        import contextlib

        from cua_rl.command_output import stdout_to_stderr

        # With --json, stdout is the result's alone (command_output.emit_json)
        words = [*getattr(ctx, "_protected_args", ()), *ctx.args]
        wanted = "--json" in words and " ".join(words[:2]) not in OWN_JSON_WRITERS
        try:
            with stdout_to_stderr() if wanted else contextlib.nullcontext():
                return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except Exception as exc:
            from cua_rl.errors import user_message

            message = user_message(exc)
            if message is None or os.environ.get("CUA_RL_TRACEBACK"):
                raise
            raise click.ClickException(message) from exc


@click.group(cls=RootGroup, lazy=COMMANDS)
@click.version_option(package_name="cua-rl")
@click.option(
    "--log-level",
    type=click.Choice(LEVELS, case_sensitive=False),
    default="INFO",
    show_default=True,
    envvar="CUA_RL_LOG_LEVEL",
    help="Level of cua-rl's messages on stderr (libraries log at WARNING); "
    "RUN_DIR/logs/run.log of train, rollout and eval keeps INFO in any case.",
)
def cli(log_level: str) -> None:
    """Train and evaluate GUI computer-use agents with asynchronous RL.

    Documentation: docs/ in the repository (architecture.md, configuration.md,
    providers.md, algorithms.md).
    """
    configure(log_level)


def main() -> None:
    cli()
