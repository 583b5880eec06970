"""Where cua-rl's log records go: stderr at the level asked, and `RUN_DIR/logs/run.log`.

`cua-rl --log-level LEVEL` (default INFO) sets the level of our own loggers
(`cua_rl.*`) on stderr; libraries stay at WARNING, because at INFO a few of them
(HTTP clients, transformers, Ray) would bury our lines. A command that runs
something (train, rollout, eval) also writes `RUN_DIR/logs/run.log`, a rotating
file that always keeps INFO (or the more verbose level asked), so a run started
with `--log-level WARNING` still leaves a full account of itself on disk.
"""

from __future__ import annotations

import contextlib
import logging
import logging.handlers
import sys
from collections.abc import Iterator
from pathlib import Path

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
"""The levels `--log-level` accepts."""
OWN_LOGGER = "cua_rl"
"""The parent of every logger of the package (`logging.getLogger(__name__)`)."""
LIBRARY_LEVEL = logging.WARNING
"""Level of every other logger (httpx, transformers, ray, ...)."""
RUN_LOG_BYTES = 20 * 1024 * 1024
"""Size at which run.log rotates to run.log.1 (three old files are kept)."""

_STDERR_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_FILE_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(process)d]: %(message)s"
_asked = logging.INFO


class _OwnHandler(logging.StreamHandler):
    """The stderr handler installed by `configure`, told apart so a second call
    replaces it. It writes to the current `sys.stderr`, not the one at creation, so
    a redirection (click's test runner, pytest's capture) never leaves it on a
    closed stream."""

    @property
    def stream(self):  # noqa: ANN201 - logging's own attribute
        return sys.stderr

    @stream.setter
    def stream(self, value: object) -> None:
        pass


def configure(level: str = "INFO") -> None:
    """Send our records at `level` (and libraries' at WARNING) to stderr.

    Our loggers are opened at INFO even when a quieter level is asked, so that a
    run log added later (`run_log`) still receives INFO; the stderr handler
    filters at the level asked. Calling it again replaces the previous setup.
    """
    global _asked
    _asked = logging.getLevelName(level.upper())
    if not isinstance(_asked, int):
        raise ValueError(f"unknown log level {level!r} (expected one of {', '.join(LEVELS)})")
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, _OwnHandler)]:
        root.removeHandler(handler)
    handler = _OwnHandler()
    handler.setLevel(_asked)
    handler.setFormatter(logging.Formatter(_STDERR_FORMAT, datefmt="%H:%M:%S"))
    root.addHandler(handler)
    root.setLevel(LIBRARY_LEVEL)
    logging.getLogger(OWN_LOGGER).setLevel(min(_asked, logging.INFO))
    logging.captureWarnings(True)


class _RunLogHandler(logging.handlers.RotatingFileHandler):
    """Opens (and creates the directories of) its file at the first record, so a
    command that fails before it logs anything leaves no run directory behind."""

    def _open(self):  # noqa: ANN202 - logging's own method
        Path(self.baseFilename).parent.mkdir(parents=True, exist_ok=True)
        return super()._open()


@contextlib.contextmanager
def run_log(run_dir: Path) -> Iterator[Path]:
    """Also write every record of this process to `run_dir/logs/run.log` (rotating)
    while inside; yields the file's path."""
    path = run_dir / "logs" / "run.log"
    handler = _RunLogHandler(path, maxBytes=RUN_LOG_BYTES, backupCount=3, delay=True)
    handler.setLevel(min(_asked, logging.INFO))
    handler.setFormatter(logging.Formatter(_FILE_FORMAT))
    root = logging.getLogger()
    root.addHandler(handler)
    own = logging.getLogger(OWN_LOGGER)
    if own.getEffectiveLevel() > handler.level:  # configure() was not called (tests, API use)
        own.setLevel(handler.level)
    try:
        yield path
    finally:
        root.removeHandler(handler)
        handler.close()
