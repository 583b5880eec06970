"""A fresh run directory for `train` and `rollout`: never mixed with an old run.

A new run written into a directory that already holds one would make both
unreadable: the store would count the old run's trajectories as the new one's,
and `train` would overwrite or resume from the old checkpoints. So `--out` on an
existing run is refused with one line saying what to do; `--overwrite` deletes
the old run first, and only ever a directory that holds a cua-rl run (one of
`RUN_MARKERS`), never an arbitrary folder. `eval` does not use this: it reuses
its `--out` on purpose, to resume scoring.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from cua_rl.errors import RunDirError

RUN_MARKERS = ("config.yaml", "run.sqlite")
"""Files whose presence makes a directory a cua-rl run."""


def new_run_dir(kind: str) -> Path:
    """The default run directory of a `kind` run (train, rollout, eval) started now:
    `runs/<kind>-<time>`, so that runs without `--out` never share one."""
    return Path("runs") / f"{kind}-{time.strftime('%Y%m%d-%H%M%S')}"


def prepare_new_run_dir(run_dir: Path, overwrite: bool, *, resumable: bool = True) -> None:
    """Create `run_dir` for a fresh run; refuse (RunDirError) to reuse a non-empty one,
    except a run directory with `overwrite`, which is deleted first.

    `resumable`: the command has `--resume` (train), so the refusal offers it.
    """
    if run_dir.exists() and not run_dir.is_dir():
        raise RunDirError(f"{run_dir}: exists and is not a directory")
    if run_dir.is_dir() and any(run_dir.iterdir()):
        is_run = any((run_dir / marker).exists() for marker in RUN_MARKERS)
        if not is_run:
            raise RunDirError(f"{run_dir}: not empty and not a cua-rl run; choose another --out")
        if not overwrite:
            keep = f"continue it with --resume {run_dir}" if resumable else "choose another --out"
            raise RunDirError(
                f"{run_dir}: already holds a run; {keep}, or add --overwrite "
                f"to delete it and start fresh"
            )
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)


def drop_older_resume_exports(exports: Path, role: str, current: Path) -> list[Path]:
    """Delete `exports/<role>-resume-v*` folders other than `current` (the weights this
    invocation's replicas start from): each `--resume` writes a whole model there, and
    the replicas of earlier invocations that used the others have stopped. Only
    directories directly under `exports` with that name go, never a link's target.
    Returns what was deleted."""
    gone = []
    for path in sorted(exports.glob(f"{role}-resume-v*")):
        if path == current or path.is_symlink() or not path.is_dir():
            continue
        shutil.rmtree(path)
        gone.append(path)
    return gone
