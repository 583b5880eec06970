"""Keeping stdout for a command's result (`--json`): everything else goes to stderr.

The root group (cli.py) runs every command given `--json` inside
`stdout_to_stderr()`, and `emit_json` is the one writer of the result: it
writes to the real stdout saved by the outermost redirection, so nothing a
command or a library prints can come before or after the JSON document.

Libraries log to stdout on their own: DeepSpeed's logger is a StreamHandler on
sys.stdout created when deepspeed is imported, and native code (gloo, CUDA)
writes to file descriptor 1. A `--json` result must be the only thing on
stdout, so while a command works its stdout is stderr, at every level:
`print`, logging handlers already bound to stdout, handlers created meanwhile
and file descriptor 1 (which child processes inherit too).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator

_saved: list[tuple[object, int | None]] = []
"""(the stdout object, its saved fd 1) of each active redirection, outermost first."""


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Inside: anything written to stdout lands on stderr. After: stdout is back,
    for the result only."""
    real = sys.stdout
    moved = _retarget_handlers(real, sys.stderr)
    saved_fd = _redirect_fd()
    _saved.append((real, saved_fd))
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        _saved.pop()
        sys.stderr.flush()
        if saved_fd is not None:
            os.dup2(saved_fd, 1)
            os.close(saved_fd)
        for handler in moved:
            handler.setStream(real)


def _retarget_handlers(old: object, new: object) -> list[logging.StreamHandler]:
    loggers = [
        logging.getLogger(),
        *(
            item
            for item in logging.Logger.manager.loggerDict.values()
            if isinstance(item, logging.Logger)
        ),
    ]
    moved = []
    for logger in loggers:
        for handler in logger.handlers:
            if isinstance(handler, logging.StreamHandler) and handler.stream is old:
                handler.setStream(new)
                moved.append(handler)
    return moved


def _redirect_fd() -> int | None:
    """Point fd 1 at fd 2; returns the saved fd 1 (None when there is no fd 1)."""
    try:
        sys.__stdout__.flush() if sys.__stdout__ else None
        saved = os.dup(1)
    except OSError:
        return None
    os.dup2(2, 1)
    return saved


def emit_json(result: object) -> None:
    """The one writer of every `--json` result: one JSON document on stdout (non-ASCII
    kept, indented), nothing else. Commands that import libraries which write to
    stdout do their work inside `stdout_to_stderr()` and call this after it."""
    import json

    text = json.dumps(result, indent=2, ensure_ascii=False, default=str) + "\n"
    stream, saved_fd = _saved[0] if _saved else (sys.stdout, None)
    if saved_fd is None or _fileno(stream) != 1:  # not fd 1 (a test's captured stdout)
        stream.write(text)
        stream.flush()
        return
    sys.stderr.flush()
    data = text.encode()
    while data:  # os.write may write less than asked (a pipe)
        data = data[os.write(saved_fd, data) :]


def _fileno(stream: object) -> int | None:
    try:
        return stream.fileno()  # type: ignore[attr-defined]  # any stream; a missing fileno is caught below
    except (AttributeError, OSError, ValueError):
        return None
