"""`cua-rl train`: the whole RL loop on one machine.

`--out` names a new run directory. An existing run there is never mixed with a
new one: the command refuses, and says to `--resume` it or to `--overwrite` it.
`--overwrite` deletes the old run directory first (its store, screenshots and
checkpoints), because a fresh run that kept any of them would report or resume
from the old run's data; it only ever deletes a directory that holds a cua-rl
run, never an arbitrary one (run_dir.py, shared with `rollout`). Errors are
reported by the root group (cli.py).
"""

from __future__ import annotations

import contextlib
import logging
import time
from pathlib import Path

import click

from cua_rl.command_output import emit_json
from cua_rl.runtime.options import OVERRIDES_HELP, overwrite_option, run_options


@click.command("train", context_settings={"ignore_unknown_options": True},
               epilog=OVERRIDES_HELP)
@run_options("New run directory (default: runs/train-<time>); one that holds a run is "
             "refused unless --overwrite (continue it with --resume).")
@click.option("--resume", "resume_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Continue the run in this directory from its last checkpoint.")
@overwrite_option
def train(config: str | None, preset: str | None, out: Path | None,
          overrides: tuple[str, ...], as_json: bool, resume_dir: Path | None,
          overwrite: bool) -> None:
    """Train policy and reward model with actors, the streaming PRM and task adaptation."""
    from cua_rl.command_output import stdout_to_stderr
    from cua_rl.errors import RunDirError, naming_path
    from cua_rl.run_logging import run_log
    from cua_rl.runtime.options import load_run_config, new_run_dir, run_stoppable
    from cua_rl.runtime.run_dir import prepare_new_run_dir
    from cua_rl.store.run_events import run_lifecycle

    if resume_dir is not None:
        saved = resume_dir / "config.yaml"
        if not saved.is_file():
            raise RunDirError(f"{resume_dir}: no config.yaml; not a cua-rl train run")
        config, preset = str(saved), None
    cfg = load_run_config(config, preset, overrides)
    run_dir = resume_dir or out or new_run_dir("train")
    if resume_dir is None:
        import yaml

        prepare_new_run_dir(run_dir, overwrite)
        with naming_path(run_dir / "config.yaml"):
            (run_dir / "config.yaml").write_text(yaml.safe_dump(cfg.model_dump(mode="json")))
    started = time.monotonic()
    quiet = stdout_to_stderr() if as_json else contextlib.nullcontext()
    with quiet, run_log(run_dir) as log_file, run_lifecycle(run_dir, "train"):
        logging.getLogger(__name__).info("%s run in %s (log: %s)", "resuming the" if resume_dir
                                         else "training", run_dir, log_file)
        if cfg.demo.eval_rollouts and resume_dir is None:
            from cua_rl.runtime.learn_demo import run_learn_demo

            summary = run_stoppable(run_learn_demo(cfg, run_dir))
        else:
            if cfg.runtime == "ray":
                from cua_rl.runtime.ray_train import run_training_ray as run_training
            else:
                from cua_rl.runtime.train import run_training
            summary = run_stoppable(run_training(cfg, run_dir, resume=resume_dir is not None))
    summary["wall_s"] = round(time.monotonic() - started, 1)
    if as_json:
        emit_json(summary)
    else:
        click.echo("  ".join(f"{k}={v}" for k, v in summary.items()))
