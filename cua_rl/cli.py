"""The `cua-rl` command.

Subcommands live next to the code they drive and are imported only when run,
so `cua-rl --help` stays fast and never imports torch.
"""

from __future__ import annotations

import importlib

import click

# name -> "module:attribute" of a click command or group.
COMMANDS: dict[str, str] = {
    "vm": "cua_rl.desktop.commands:vm",
    "bench": "cua_rl.cli:bench",
    "tasks": "cua_rl.tasks.commands:tasks",
    "templates": "cua_rl.tasks.commands:templates",
    "tiny-model": "cua_rl.inference.commands:tiny_model",
    "serve": "cua_rl.inference.commands:serve",
    "runs": "cua_rl.store.commands:runs",
    "rollout": "cua_rl.rollout.commands:rollout",
    "train": "cua_rl.runtime.train_command:train",
    "eval": "cua_rl.report.commands:eval_command",
    "view": "cua_rl.viewer.commands:view",
    "plot": "cua_rl.report.plot_command:plot",
}

BENCH_COMMANDS: dict[str, str] = {
    "guest": "cua_rl.desktop.bench:bench_guest",
    "learn": "cua_rl.learner.bench_learn:bench_learn",
    "fleet": "cua_rl.rollout.bench_fleet:bench_fleet",
    "inference": "cua_rl.inference.bench_inference:bench_inference",
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use."""

    def __init__(self, *args, lazy: dict[str, str], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.lazy:
            module, attr = self.lazy[name].split(":")
            return getattr(importlib.import_module(module), attr)
        return super().get_command(ctx, name)


@click.group(cls=LazyGroup, lazy=COMMANDS)
@click.version_option(package_name="cua-rl")
def cli() -> None:
    """Train and evaluate GUI computer-use agents with asynchronous RL."""


@click.group(cls=LazyGroup, lazy=BENCH_COMMANDS)
def bench() -> None:
    """Benchmarks that print figures (timing goals live here, not in tests)."""


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
