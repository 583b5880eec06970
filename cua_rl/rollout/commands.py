"""`cua-rl rollout`: collect rollouts and verdicts into a run directory, no learning.

`--out` names a new run directory: an existing run there is refused (its store
would count both runs' trajectories as one), unless `--overwrite` deletes it
first; the check comes before any desktop or model starts (run_dir.py).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import click

from cua_rl.command_output import emit_json
from cua_rl.runtime.options import OVERRIDES_HELP, overwrite_option, run_options


@click.command("rollout", context_settings={"ignore_unknown_options": True},
               epilog=OVERRIDES_HELP)
@run_options("New run directory (default: runs/rollout-<time>); one that holds a run is "
             "refused unless --overwrite.")
@overwrite_option
def rollout(config: str | None, preset: str | None, out: Path | None,
            overrides: tuple[str, ...], as_json: bool, overwrite: bool) -> None:
    """Run task groups on desktops with the policy and the streaming reward model."""
    from cua_rl.errors import RunFailed
    from cua_rl.run_logging import run_log
    from cua_rl.runtime.options import load_run_config, new_run_dir, run_stoppable
    from cua_rl.runtime.rollout import run_rollouts
    from cua_rl.runtime.run_dir import prepare_new_run_dir
    from cua_rl.store.run_events import run_lifecycle

    cfg = load_run_config(config, preset, overrides)
    run_dir = out or new_run_dir("rollout")
    prepare_new_run_dir(run_dir, overwrite, resumable=False)
    started = time.monotonic()
    with run_log(run_dir) as log_file, run_lifecycle(run_dir, "rollout"):
        logging.getLogger(__name__).info("rollouts into %s (log: %s)", run_dir, log_file)
        counts = run_stoppable(run_rollouts(cfg, run_dir))
        if counts.get("gave_up") and not counts.get("episodes"):
            raise RunFailed(f"{run_dir}: every episode was given up ({counts['gave_up']}); "
                            f"see the reasons with `cua-rl runs show {run_dir}`")
    summary = {"run_dir": str(run_dir), "wall_s": round(time.monotonic() - started, 1),
               **{k: v for k, v in counts.items() if k != "wall_s"}}
    if as_json:
        emit_json(summary)
    else:
        click.echo("  ".join(f"{k}={v}" for k, v in summary.items()))
