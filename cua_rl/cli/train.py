"""`cua-rl train`: the whole RL loop on one machine.

`--out` names a new run directory. An existing run there is never mixed with a
new one: the command refuses, and says to `--resume` it or to `--overwrite` it.
`--overwrite` deletes the old run directory first (its store, screenshots and
checkpoints), because a fresh run that kept any of them would report or resume
from the old run's data; it only ever deletes a directory that holds a cua-rl
run, never an arbitrary one (runtime/run_dir.py, shared with `rollout`). The run
itself is runtime/run_launch.py; errors are reported by the root group (cli/root.py).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import click

from cua_rl.cli.options import (
    OVERRIDES_HELP,
    dry_run_options,
    load_run_config,
    overwrite_option,
    print_dry_run,
    run_options,
)
from cua_rl.command_output import emit_json


@click.command("train", context_settings={"ignore_unknown_options": True}, epilog=OVERRIDES_HELP)
@run_options(
    "New run directory (default: runs/train-<time>); one that holds a run is "
    "refused unless --overwrite (continue it with --resume)."
)
@click.option(
    "--resume",
    "resume_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Continue the run in this directory from its last checkpoint.",
)
@overwrite_option
@dry_run_options
def train(
    config: str | None,
    preset: str | None,
    out: Path | None,
    overrides: tuple[str, ...],
    as_json: bool,
    resume_dir: Path | None,
    overwrite: bool,
    dry_run: bool,
    nodes: str | None,
) -> None:
    """Train policy and reward model with actors, the streaming PRM and task adaptation.

    --dry-run prints every process the run would start (role, node, GPUs, command,
    environment; under runtime ray the bundles and their predicted nodes) and starts
    nothing; a layout that does not fit the nodes exits 1 with what would fit."""
    from cua_rl.command_output import stdout_to_stderr
    from cua_rl.runtime.run_dir import new_run_dir
    from cua_rl.runtime.run_launch import launch_train, saved_train_config

    if resume_dir is not None:
        if config is not None and "=" not in config:
            raise click.UsageError(
                "--resume runs the config saved in the run directory: "
                "give overrides (key=value), not a CONFIG file"
            )
        if config is not None:  # click took the first override as CONFIG: keep it
            overrides = (config, *overrides)
        config, preset = str(saved_train_config(resume_dir)), None
    cfg = load_run_config(config, preset, overrides)
    if dry_run:
        print_dry_run(cfg, nodes, as_json)
        return
    run_dir = resume_dir or out or new_run_dir("train")
    with stdout_to_stderr() if as_json else contextlib.nullcontext():
        summary = launch_train(cfg, run_dir, resume=resume_dir is not None, overwrite=overwrite)
    if as_json:
        emit_json(summary)
    else:
        click.echo("  ".join(f"{k}={v}" for k, v in summary.items()))
