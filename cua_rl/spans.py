"""Recorded spans: where a run's wall time goes, per process, as JSON lines.

Off unless a run turns it on (`metrics.spans`): then `configure(run_dir)` makes
this process write `<run_dir>/spans/spans-<pid>.jsonl`, one line per span:

    {"kind": "policy_call", "start": 1718000000.123, "end": 1718000002.456,
     "pid": 4242, "tid": "9f...", ...attrs}

Times are `time.time()` (wall clock), so spans of several processes (Ray fleet
workers, the driver's learners) and the run store's `started_at`/`finished_at`
line up. A span that ended by an exception carries `"error": "<ExceptionType>"`.
`cua_rl/report/loop_profile.py` reads the files back.

Why this shape: the training loop is asyncio, so a span must cost next to nothing
on the event loop. Off, `span()` returns one shared no-op object (a function call);
on, a span is two `time.time()` calls and a tuple appended to a list under an
uncontended lock; lines are encoded and written together every `flush_lines`
spans or `flush_s` seconds, and at `close()` / process exit. A crash loses at
most the unflushed tail; a torn last line is skipped by the reader.

Bounded: a file that reaches `max_bytes` (`metrics.spans_max_mb`, 64 MB; ~18 h of the
quickstart's 3.6 MB/h) is renamed to `spans-<pid>.1.jsonl`, replacing the one before,
and a new file starts, so a process keeps at most twice that and always its latest
spans; the reader reads both (`spans-*.jsonl`). Each rotation is logged once.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

SPANS_DIR = "spans"
"""Folder under the run directory that holds the span files."""
MAX_BYTES = 64 * 1024 * 1024
"""Default size of a span file before it rotates (`metrics.spans_max_mb`)."""

_log = logging.getLogger(__name__)


class Span:
    """One timed interval; a `with` or `async with` block, or `begin()` ... `end()`
    when the interval does not fit a block (a lease whose body is the episode)."""

    __slots__ = ("attrs", "kind", "t0")

    def __init__(self, kind: str, attrs: dict[str, Any]) -> None:
        self.kind = kind
        self.attrs = attrs
        self.t0 = 0.0

    def set(self, **attrs: Any) -> None:
        """Attributes known only inside the span (steps of an episode, replica)."""
        self.attrs.update(attrs)

    def begin(self) -> Span:
        self.t0 = time.time()
        return self

    def end(self, error: BaseException | type[BaseException] | None = None) -> None:
        recorder = _recorder
        if recorder is not None:
            if error is not None:
                name = error.__name__ if isinstance(error, type) else type(error).__name__
                self.attrs["error"] = name
            recorder.add(self.kind, self.t0, time.time(), self.attrs)

    def __enter__(self) -> Span:
        return self.begin()

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.end(et)

    async def __aenter__(self) -> Span:
        return self.begin()

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.end(et)


class _NullSpan(Span):
    """What `span()` returns while recording is off: does nothing."""

    __slots__ = ()

    def set(self, **attrs: Any) -> None:
        pass

    def begin(self) -> Span:
        return self

    def end(self, error: BaseException | type[BaseException] | None = None) -> None:
        pass


_NULL = _NullSpan("", {})


class _Recorder:
    """The buffer and file of this process (see module doc)."""

    def __init__(
        self, path: Path, flush_lines: int, flush_s: float, max_bytes: int = MAX_BYTES
    ) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.max_bytes = max_bytes
        self.pid = os.getpid()
        self.flush_lines = flush_lines
        self.flush_s = flush_s
        self._file = path.open("a", encoding="utf-8")
        self._buffer: list[tuple[str, float, float, dict[str, Any]]] = []
        self._lock = threading.Lock()
        self._next_flush = time.time() + flush_s
        self._marked: set[Any] = set()

    def add(self, kind: str, start: float, end: float, attrs: dict[str, Any]) -> None:
        with self._lock:
            self._buffer.append((kind, start, end, attrs))
            if len(self._buffer) >= self.flush_lines or end >= self._next_flush:
                self._flush_locked()

    def mark_once(self, key: Any) -> bool:
        with self._lock:
            if key in self._marked:
                return False
            self._marked.add(key)
            return True

    def flush(self) -> None:
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        self._next_flush = time.time() + self.flush_s
        if not self._buffer or self._file.closed:
            return
        pid = self.pid
        lines = [
            json.dumps({"kind": kind, "start": start, "end": end, "pid": pid, **attrs}, default=str)
            + "\n"
            for kind, start, end, attrs in self._buffer
        ]
        self._buffer.clear()
        self._file.write("".join(lines))
        self._file.flush()
        if self._file.tell() >= self.max_bytes:
            self._rotate_locked()

    def _rotate_locked(self) -> None:
        """The full file becomes `<stem>.1.jsonl` (replacing an older one)."""
        self._file.close()
        old = self.path.with_name(self.path.stem + ".1.jsonl")
        os.replace(self.path, old)
        self._file = self.path.open("a", encoding="utf-8")
        _log.info(
            "spans: %s reached %.0f MB; moved to %s (the one before is dropped)",
            self.path.name,
            self.max_bytes / 1e6,
            old.name,
        )

    def close(self) -> None:
        with self._lock:
            self._flush_locked()
            self._file.close()


_recorder: _Recorder | None = None


def configure(
    run_dir: Path | None,
    *,
    flush_lines: int = 256,
    flush_s: float = 2.0,
    max_bytes: int = MAX_BYTES,
) -> None:
    """Record this process's spans under `run_dir/spans/` (None: stop recording), in
    files of at most about `max_bytes`. A recorder already on is closed first (its
    lines are kept)."""
    global _recorder
    close()
    if run_dir is not None:
        path = Path(run_dir) / SPANS_DIR / f"spans-{os.getpid()}.jsonl"
        _recorder = _Recorder(path, flush_lines, flush_s, max_bytes)


def close() -> None:
    """Flush and stop recording (idempotent)."""
    global _recorder
    recorder, _recorder = _recorder, None
    if recorder is not None:
        recorder.close()


def enabled() -> bool:
    """Whether spans are recorded: compute costly attributes only then."""
    return _recorder is not None


def flush() -> None:
    if _recorder is not None:
        _recorder.flush()


def span(kind: str, **attrs: Any) -> Span:
    """A span of `kind`, timed from entering the block (or `begin()`) to leaving it."""
    if _recorder is None:
        return _NULL
    return Span(kind, attrs)


def record(kind: str, start: float, end: float, **attrs: Any) -> None:
    """A span measured elsewhere (wall-clock `time.time()` seconds)."""
    if _recorder is not None:
        _recorder.add(kind, start, end, attrs)


def mark(kind: str, **attrs: Any) -> None:
    """A zero-length span: a fact at a moment (a pool's size, a fleet's actors)."""
    if _recorder is not None:
        now = time.time()
        _recorder.add(kind, now, now, attrs)


def mark_once(key: Any, kind: str, **attrs: Any) -> None:
    """`mark` the first time `key` is seen by this process's recorder."""
    if _recorder is not None and _recorder.mark_once(key):
        mark(kind, **attrs)


class recording:  # noqa: N801 - used like contextlib's lower-case managers
    """`configure(run_dir)` for a block (sync or async), `close()` after it; a None
    `run_dir` records nothing. What a run's start wraps its work in. Nested in a
    block that already records (a fleet worker run in the driver's process), it
    leaves that recorder alone."""

    def __init__(self, run_dir: Path | None, max_bytes: int = MAX_BYTES) -> None:
        self.run_dir = run_dir
        self.max_bytes = max_bytes
        self._owner = False

    def __enter__(self) -> recording:
        if self.run_dir is not None and _recorder is None:
            configure(self.run_dir, max_bytes=self.max_bytes)
            self._owner = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self._owner:
            self._owner = False
            close()

    async def __aenter__(self) -> recording:
        return self.__enter__()

    async def __aexit__(self, *exc: object) -> None:
        self.__exit__()


def _forget_in_child() -> None:
    """A forked child must not write into its parent's file and buffer."""
    global _recorder
    _recorder = None


os.register_at_fork(after_in_child=_forget_in_child)
atexit.register(close)
