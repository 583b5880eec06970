"""`cua-rl rollout`: collect rollouts and verdicts into a run directory, no learning.

`--out` names a new run directory: an existing run there is refused (its store
would count both runs' trajectories as one), unless `--overwrite` deletes it
first; the check comes before any desktop or model starts (runtime/run_dir.py,
runtime/run_launch.py).
"""

from __future__ import annotations

from pathlib import Path

import click

from cua_rl.cli.options import OVERRIDES_HELP, load_run_config, overwrite_option, run_options
from cua_rl.command_output import emit_json


@click.command("rollout", context_settings={"ignore_unknown_options": True}, epilog=OVERRIDES_HELP)
@run_options(
    "New run directory (default: runs/rollout-<time>); one that holds a run is "
    "refused unless --overwrite."
)
@overwrite_option
def rollout(
    config: str | None,
    preset: str | None,
    out: Path | None,
    overrides: tuple[str, ...],
    as_json: bool,
    overwrite: bool,
) -> None:
    """Run task groups on desktops with the policy and the streaming reward model."""
    from cua_rl.runtime.run_dir import new_run_dir
    from cua_rl.runtime.run_launch import launch_rollout

    cfg = load_run_config(config, preset, overrides)
    summary = launch_rollout(cfg, out or new_run_dir("rollout"), overwrite=overwrite)
    if as_json:
        emit_json(summary)
    else:
        click.echo("  ".join(f"{k}={v}" for k, v in summary.items()))
