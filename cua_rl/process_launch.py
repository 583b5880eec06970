"""The one seam every child process of a run passes when it starts: its launch record.

Model replicas (`inference/launcher.py`) and learner rank processes
(`learner/rank_process.py`) build a `ProcessLaunch` (role, command, the environment
the launcher sets, devices) with the same functions whether they start it or a dry
run prints it (`cua-rl train --dry-run`, runtime/launch_plan.py); when they start
it, `record_launch` hands the record to whoever listens. A real run listens with a
`LaunchLog`, so RUN_DIR/launch.jsonl says what ran where, and a test can compare it
with the dry run argument for argument.

A record never holds a secret: the values of `SECRET_ENV` keys (the model servers'
credential) are replaced by `<secret>` before anyone sees them.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

SECRET = "<secret>"
SECRET_ENV = frozenset({"CUA_RL_MODEL_TOKEN"})
"""Environment keys whose values are credentials (inference/server_auth.TOKEN_ENV)."""


@dataclass(frozen=True)
class ProcessLaunch:
    """One process as it is (or would be) started."""

    role: str
    """`policy replica 0`, `prm learner rank 1`, ..."""
    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    """What the launcher sets on top of its own environment (the rest is inherited)."""
    devices: tuple[str, ...] = ()
    """GPU ids it is given (its CUDA_VISIBLE_DEVICES); empty: none."""
    node: str = "driver"
    """Where it runs: `driver` (the driver's machine) or a dry run's node name."""

    def redacted(self) -> ProcessLaunch:
        return replace(self, env={k: SECRET if k in SECRET_ENV else v for k, v in self.env.items()})

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self.redacted())
        out["argv"], out["devices"] = list(self.argv), list(self.devices)
        return out


Listener = Callable[[ProcessLaunch], None]
_listeners: list[Listener] = []
_lock = threading.Lock()


def record_launch(launch: ProcessLaunch) -> None:
    """Tell every listener that `launch` is being started (redacted)."""
    with _lock:
        listeners = list(_listeners)
    for listener in listeners:
        listener(launch.redacted())


@contextlib.contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """`listener` hears every launch of this process while the block runs."""
    with _lock:
        _listeners.append(listener)
    try:
        yield
    finally:
        with _lock:
            _listeners.remove(listener)


class LaunchLog:
    """Appends each launch as one JSON line (RUN_DIR/launch.jsonl)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __call__(self, launch: ProcessLaunch) -> None:
        with self.path.open("a") as out:
            out.write(json.dumps(launch.as_dict()) + "\n")
