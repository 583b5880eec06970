"""The fault classes of `cua-rl bench faults`: each injects one fault into a real
short run (quickstart-sized: local desktops, the tiny model, hf engines) and
computes its figures from the run's store, its outputs and the process table.

Figures of one fault (never asserted here; the bench reports, the tests assert):
- survived: the run ended by itself (or, after SIGTERM/SIGKILL, stopped and then
  `--resume` ran it to the end), its store says finished, and nothing it started
  is left running (no descendant process, no live desktop of its state dir); for
  `disk_full`, where no run can go on, it means: ended by itself with one error
  line that names the full disk, no traceback, nothing left running;
- trajectories_lost: finished episodes the run reported that are not in its store
  (a rollout reports them in its JSON summary, `episodes`; a training run in its
  metrics.jsonl, one `rollout` record per finished group with its `trajectories`,
  flushed as written, so a SIGKILLed run's reports survive it);
- updates_duplicated: learner updates recorded more than once (metrics.jsonl) plus
  versions skipped, 0 for a rollout;
- episodes_aborted: aborted trajectories in the store;
- recover_s: seconds from the injection until the run made progress again (the
  next good trajectory stored; for SIGTERM: until the run had stopped).
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from cua_rl.bench.faults.watched_run import RunProcess, poll_until, store_summary
from cua_rl.net_ports import PortReservation, address_in_use, on_free_port_sync

STOP_DEADLINE_S = 20.0
"""SIGTERM must stop a run within this (10 s, plus a checkpoint write in progress)."""


@dataclass
class FaultBench:
    """Where the runs live and how long each may take."""

    work_dir: Path
    deadline_s: float = 300.0
    log: Callable[[str], None] = print
    tiny_dir: Path | None = None
    """The tiny model to serve (None: the default one, built on first use)."""

    @property
    def base_overrides(self) -> list[str]:
        """Overrides of every run: no live table, the bench's tiny model."""
        return [
            "metrics.live=false",
            *([f"tiny_model_dir={self.tiny_dir}"] if self.tiny_dir else []),
        ]

    def run(
        self,
        name: str,
        kind: str,
        overrides: list[str] | None = None,
        *,
        run_dir: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> RunProcess:
        run_dir = run_dir or self.work_dir / name
        self.log(f"[{name}] starting {kind} run in {run_dir}")
        return RunProcess(
            kind,
            run_dir,
            self.work_dir / f"{name}.desktops",
            [*self.base_overrides, *(overrides or [])],
            env=dict(env or {}),
        ).start()

    def resume(self, first: RunProcess) -> RunProcess:
        self.log(f"[{first.run_dir.name}] resuming")
        return RunProcess(first.kind, first.run_dir, first.state_dir, resume=True).start()


def good_trajectories(run_dir: Path) -> int:
    summary = store_summary(run_dir)
    return summary["trajectories"] if summary else 0


def wait_for_progress(run: RunProcess, deadline_s: float, after: int = 0) -> float | None:
    """Seconds until the store holds more than `after` good trajectories (None: the
    run ended or the deadline passed first)."""
    t0 = time.monotonic()

    def progressed() -> bool:
        run.descendants()
        return good_trajectories(run.run_dir) > after or run.proc.poll() is not None  # type: ignore[union-attr]  # the run was started, so proc is set

    poll_until(progressed, deadline_s, 0.5)
    if good_trajectories(run.run_dir) > after:
        return round(time.monotonic() - t0, 1)
    return None


def metrics_records(run_dir: Path) -> list[dict[str, Any]]:
    """The records of the run's metrics.jsonl (a resumed run appends to it); a line
    cut short by a kill is skipped."""
    try:
        lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    except OSError:
        return []
    records = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def updates_duplicated(run_dir: Path) -> int:
    """Learner updates logged twice, plus versions skipped, from metrics.jsonl."""
    seen: Counter[tuple[str, int]] = Counter()
    for record in metrics_records(run_dir):
        if record.get("scope") in ("policy", "prm"):
            seen[(record["scope"], int(record["step"]))] += 1
    dupes = sum(n - 1 for n in seen.values())
    for scope in ("policy", "prm"):
        steps = sorted(step for s, step in seen if s == scope)
        if steps:
            dupes += len(set(range(1, steps[-1] + 1)) - set(steps))
    return dupes


class ReportingRun(Protocol):
    """What `trajectories_reported` reads of a run invocation (a RunProcess)."""

    kind: str
    run_dir: Path

    def summary(self) -> dict[str, Any] | None: ...


def trajectories_reported(runs: Iterable[ReportingRun]) -> int:
    """Finished episodes the runs reported: each rollout invocation's summary
    `episodes`; for training, the `trajectories` of the `rollout` records in
    metrics.jsonl, read once per run directory (a resume appends to the same file,
    and a SIGKILLed run prints no summary)."""
    runs = list(runs)
    reported = sum(int((r.summary() or {}).get("episodes", 0)) for r in runs if r.kind == "rollout")
    for run_dir in dict.fromkeys(r.run_dir for r in runs if r.kind == "train"):
        reported += sum(
            int(record.get("trajectories", 0))
            for record in metrics_records(run_dir)
            if record.get("scope") == "rollout"
        )
    return reported


def trajectories_lost(runs: Iterable[ReportingRun], stored: int) -> int:
    """Reported finished episodes that the store does not hold (`stored`: its good
    trajectories; episodes stored but not yet reported when a run was killed are
    no loss)."""
    return max(0, trajectories_reported(runs) - stored)


def figures(
    name: str,
    runs: list[RunProcess],
    codes: list[int | None],
    recover_s: float | None,
    *,
    extra_ok: bool = True,
    detail: str = "",
    need_finished: bool = True,
) -> dict[str, Any]:
    """The figures of one fault from its run(s) (see the module docstring)."""
    last = runs[-1]
    summary = store_summary(last.run_dir) or {}
    left = last.leftovers()
    for earlier in runs[:-1]:
        more = earlier.leftovers(grace_s=0)
        left["processes"].update(more["processes"])
    lost = trajectories_lost(runs, summary.get("trajectories", 0))
    ended = codes[-1] == 0
    survived = (
        ended
        and (bool(summary.get("finished")) or not need_finished)
        and extra_ok
        and not left["processes"]
        and not left["desktops"]
    )
    why = []
    if codes[-1] is None:
        why.append(f"did not end within the deadline (killed); {detail}".strip("; "))
    elif codes[-1] != 0:
        errors = last.error_lines()
        why.append(f"exit {codes[-1]}: {errors[-1] if errors else 'no error line'}")
    elif detail:
        why.append(detail)
    if left["processes"] or left["desktops"]:
        why.append(f"left running: {len(left['processes'])} processes, desktops {left['desktops']}")
    return {
        "name": name,
        "survived": survived,
        "trajectories_lost": lost,
        "updates_duplicated": updates_duplicated(last.run_dir),
        "episodes_aborted": summary.get("aborted", 0),
        "recover_s": recover_s,
        **({} if survived else {"why": "; ".join(why) or "store not finished"}),
    }


@contextlib.contextmanager
def model_server(tiny_dir: Path, log: Path) -> Iterator[str]:
    """A real `cua-rl serve --engine hf` replica of the tiny model on a free port (on
    another one when the port picked is taken before the server binds it)."""
    log.write_bytes(b"")
    proc, port = on_free_port_sync(
        lambda port: _start_model_server(tiny_dir, log, port), f"start of the model server ({log})"
    )
    try:
        yield f"http://127.0.0.1:{port.port}"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        port.release()


def _start_model_server(
    tiny_dir: Path, log: Path, port: PortReservation
) -> tuple[subprocess.Popen, PortReservation]:
    """Start the server on `port` and wait for /health; the log names what failed (an
    `OSError` EADDRINUSE when the port was taken, so the start is retried)."""
    import errno
    import urllib.request

    start = log.stat().st_size
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "cua_rl.cli",
                "serve",
                "--engine",
                "hf",
                "--model",
                str(tiny_dir),
                "--port",
                str(port.port),
                "--threads",
                "1",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port.port}"

    def ready() -> bool:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as answer:
                return answer.status == 200
        except OSError:
            return proc.poll() is not None  # died: stop waiting

    try:
        poll_until(ready, 300, 0.5)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    if proc.poll() is not None:
        output = log.read_bytes()[start:].decode(errors="replace")
        if address_in_use(output):
            raise OSError(
                errno.EADDRINUSE, f"model server could not bind port {port.port}; see {log}"
            )
        raise RuntimeError(f"model server exited; see {log}")
    return proc, port
