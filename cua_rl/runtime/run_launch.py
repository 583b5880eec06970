"""A `train`, `rollout` or `eval` run as one call: its run directory prepared, its log and
lifecycle recorded, the run itself stoppable by Ctrl-C or SIGTERM.

The command line only resolves the config and the run directory and prints the
summary these return; keeping the rest here lets anything that starts a run (a
test, a script) get exactly what `cua-rl train`, `rollout` and `eval` do.
"""

from __future__ import annotations

import contextlib
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cua_rl.errors import RunDirError, RunFailed, naming_path
from cua_rl.process_launch import LaunchLog, listening
from cua_rl.run_logging import run_log
from cua_rl.runtime.run_dir import prepare_new_run_dir
from cua_rl.runtime.stoppable import run_stoppable
from cua_rl.store.run_events import run_lifecycle

if TYPE_CHECKING:
    from cua_rl.config import RunConfig
    from cua_rl.runtime.evaluation_run import EvalProgress, EvalResult

log = logging.getLogger(__name__)


LAUNCH_LOG = "launch.jsonl"
"""Every process the run started, as it was started (process_launch.py)."""


def launch_log(run_dir: Path) -> contextlib.AbstractContextManager[None]:
    """Record every process the run starts in RUN_DIR/launch.jsonl, appended to on
    `--resume` (role, command, the environment set for it with secrets redacted,
    devices): what ran where, comparable with `cua-rl train --dry-run`."""
    return listening(LaunchLog(run_dir / LAUNCH_LOG))


def saved_train_config(resume_dir: Path) -> Path:
    """The config.yaml a train run saved in `resume_dir`: `--resume` runs exactly it."""
    saved = resume_dir / "config.yaml"
    if not saved.is_file():
        raise RunDirError(f"{resume_dir}: no config.yaml; not a cua-rl train run")
    return saved


def launch_train(
    cfg: RunConfig, run_dir: Path, *, resume: bool, overwrite: bool = False
) -> dict[str, Any]:
    """Train in `run_dir` (a fresh one, refused if it holds a run unless `overwrite`,
    with `cfg` saved as config.yaml; or, `resume`, the run there from its last
    checkpoint). Returns the run's summary with its wall time."""
    if not resume:
        import yaml

        prepare_new_run_dir(run_dir, overwrite)
        with naming_path(run_dir / "config.yaml"):
            (run_dir / "config.yaml").write_text(yaml.safe_dump(cfg.model_dump(mode="json")))
    started = time.monotonic()
    with run_log(run_dir) as log_file, run_lifecycle(run_dir, "train"), launch_log(run_dir):
        log.info(
            "%s run in %s (log: %s)", "resuming the" if resume else "training", run_dir, log_file
        )
        for line in keeping_lines(cfg):
            log.info("%s", line)
        if cfg.demo.eval_rollouts and not resume:
            from cua_rl.runtime.learn_demo import run_learn_demo

            summary = run_stoppable(run_learn_demo(cfg, run_dir))
        else:
            if cfg.runtime == "ray":
                from cua_rl.runtime.ray.train import run_training_ray as run_training
            else:
                from cua_rl.runtime.train import run_training
            summary = run_stoppable(run_training(cfg, run_dir, resume=resume))
    summary["wall_s"] = round(time.monotonic() - started, 1)
    return summary


def keeping_lines(cfg: RunConfig) -> list[str]:
    """What the run will delete as it goes and what it keeps: screenshot retention
    (`store.retention`) and learner checkpoints (`train.<role>.keep_*`), said at the
    start so nobody learns it when an export or an evaluation finds something gone."""
    from cua_rl.learner.checkpoint_keep import describe as checkpoints
    from cua_rl.store.retention import describe as retention

    lines = [retention(cfg.store.retention), checkpoints("policy", cfg.train.policy.keeping())]
    if cfg.train.prm.enabled:
        lines.append(checkpoints("prm", cfg.train.prm.keeping()))
    return lines


def launch_rollout(cfg: RunConfig, run_dir: Path, *, overwrite: bool = False) -> dict[str, Any]:
    """Collect rollouts and verdicts into the fresh `run_dir` (refused if it holds a
    run unless `overwrite`), no learning. Returns the run's counts with its wall
    time; RunFailed when every episode was given up."""
    from cua_rl.runtime.rollout_run import run_rollouts

    prepare_new_run_dir(run_dir, overwrite, resumable=False)
    started = time.monotonic()
    with run_log(run_dir) as log_file, run_lifecycle(run_dir, "rollout"), launch_log(run_dir):
        log.info("rollouts into %s (log: %s)", run_dir, log_file)
        counts = run_stoppable(run_rollouts(cfg, run_dir))
        if counts.get("gave_up") and not counts.get("episodes"):
            raise RunFailed(
                f"{run_dir}: every episode was given up ({counts['gave_up']}); "
                f"see the reasons with `cua-rl runs show {run_dir}`"
            )
    return {
        "run_dir": str(run_dir),
        "wall_s": round(time.monotonic() - started, 1),
        **{k: v for k, v in counts.items() if k != "wall_s"},
    }


def launch_eval(
    cfg: RunConfig,
    run_dir: Path,
    runs: int,
    *,
    progress: EvalProgress | None = None,
    check: bool = True,
    full_hash: bool = False,
    manifest: dict[str, Any] | None = None,
) -> EvalResult:
    """Evaluate in `run_dir` (`evaluation_run.run_evaluation`: manifest.json, the task
    runs it has not scored yet, then the report), with the run's log and lifecycle
    recorded."""
    import asyncio

    from cua_rl.runtime.evaluation_run import run_evaluation

    with run_log(run_dir), run_lifecycle(run_dir, "eval"), launch_log(run_dir):
        return asyncio.run(
            run_evaluation(
                cfg,
                run_dir,
                runs,
                progress=progress,
                check=check,
                full_hash=full_hash,
                manifest=manifest,
            )
        )
