"""A real short run in a subprocess, watched from outside for `cua-rl bench faults`.

The run is `cua-rl rollout|train --preset quickstart` in its own session, with its
own desktop state dir, so that everything it starts can be found from the process
table (model replicas, desktop launchers, guest servers are its descendants) and
from its run directory (store, logs). Nothing here asserts: it observes what the
run did (store counters, exit status) and what it left behind (live processes,
desktops), and the fault cases turn that into figures.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from cua_rl.desktop.providers.local import state as st
from cua_rl.runtime.telemetry.replica_logs import ReplicaLogs

TRUNCATE_TRIGGER = ".cua-fault-truncate-screenshot"
"""The guest's fault trigger file in the desktop home (vm/guest routes_info.py)."""
FAULT_HOOKS_ENV = {"CUA_GUEST_FAULT_HOOKS": "1"}
"""Environment that arms the guest's fault hooks (passed through to the desktops)."""

LEFTOVER_GRACE_S = 30.0
"""How long a run's children may take to stop after it ended (a desktop whose run
was killed notices through its owner watch and stops itself)."""


def poll_until(predicate: Callable[[], Any], deadline_s: float, interval_s: float = 0.2) -> Any:
    """The first truthy value of `predicate` before the deadline, else None."""
    end = time.monotonic() + deadline_s
    while True:
        value = predicate()
        if value or time.monotonic() >= end:
            return value or None
        time.sleep(interval_s)


def server_pattern(port: int) -> str:
    """A regex of the command line of a model server on `port`: `cua-rl serve` (hf)
    or vLLM's OpenAI server, as the run's replica sets start them."""
    return rf"(\sserve\s|vllm\.entrypoints\.openai\.api_server\s).*--port[ =]{port}\b"


START_TOLERANCE_S = 0.05
"""Two start times (psutil create_time) closer than this are the same process."""


def _alive(pid: int, started: float | None = None) -> bool:
    """True while `pid` runs (not a zombie) and, given its start time, is still the
    process that started then: over a long run, pids of processes that ended are
    reused by others (another desktop's, a kernel worker), which are not the run's."""
    try:
        proc = psutil.Process(pid)
        return proc.status() != psutil.STATUS_ZOMBIE and (
            started is None or abs(proc.create_time() - started) < START_TOLERANCE_S
        )
    except psutil.NoSuchProcess:
        return False


@dataclass
class RunProcess:
    """One `cua-rl` run invocation (`rollout`/`train`, fresh or `--resume`)."""

    kind: str
    run_dir: Path
    state_dir: Path
    overrides: list[str] = field(default_factory=list)
    resume: bool = False
    env: dict[str, str] = field(default_factory=dict)
    """Extra environment of the run (fault hooks of the guest, e.g.)."""
    proc: subprocess.Popen[str] | None = None
    seen: dict[int, str] = field(default_factory=dict)
    """Every descendant pid seen while the run lived -> its command line."""
    seen_started: dict[int, float] = field(default_factory=dict)
    """Their start times: which process a pid was when seen (`remember`)."""
    started: float = 0.0
    _logs: ReplicaLogs | None = field(default=None, repr=False)

    def start(self) -> RunProcess:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        where = (
            ["--resume", str(self.run_dir)]
            if self.resume
            else ["--preset", "quickstart", "--out", str(self.run_dir)]
        )
        cmd = [
            sys.executable,
            "-m",
            "cua_rl.cli",
            self.kind,
            *where,
            "--json",
            *([] if self.resume else self.overrides),
        ]
        env = {**os.environ, **self.env, "CUA_RL_STATE_DIR": str(self.state_dir)}
        # Outputs beside the desktop state dir, not in the run dir (which may be full).
        log = self.state_dir.with_suffix(".resume" if self.resume else ".run")
        self.out_path, self.err_path = Path(f"{log}.out"), Path(f"{log}.err")
        self.proc = subprocess.Popen(
            cmd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self.out_path.open("w"),
            stderr=self.err_path.open("w"),
            start_new_session=True,
            text=True,
        )
        self.started = time.monotonic()
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def descendants(self) -> list[psutil.Process]:
        """The run's live descendants now (and remember them for `leftovers`)."""
        try:
            children = psutil.Process(self.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []
        for child in children:
            try:
                self.remember(child.pid, " ".join(child.cmdline()), child.create_time())
            except psutil.Error:
                pass
        return children

    def remember(self, pid: int, cmd: str, started: float) -> None:
        """Record a process of the run. A pid met again with a later start time is
        another process (the first ended and its pid was reused): it replaces it. The
        same process met again keeps its latest command line: one first seen between
        its fork and its exec showed its parent's (a restarted vLLM replica was then
        never found on its port)."""
        if pid not in self.seen_started or started > self.seen_started[pid] + START_TOLERANCE_S:
            self.seen[pid], self.seen_started[pid] = cmd, started
        elif cmd and abs(started - self.seen_started[pid]) <= START_TOLERANCE_S:
            self.seen[pid] = cmd

    def is_ours(self, pid: int) -> bool:
        """Whether `pid` still runs as the process of the run that was seen."""
        return _alive(pid, self.seen_started.get(pid))

    def find(self, pattern: str) -> list[int]:
        """Pids of live descendants whose command line matches `pattern` (regex)."""
        live = {child.pid for child in self.descendants()}
        return [
            pid
            for pid, cmd in self.seen.items()
            if pid in live and re.search(pattern, cmd) and self.is_ours(pid)
        ]

    def replica_pids(self, role: str) -> list[int]:
        """Pids of the run's `role` model replicas (policy/prm): a replica's log
        `logs/<role>-<i>.log` names the port its server process listens on."""
        if self._logs is None:
            self._logs = ReplicaLogs(self.run_dir)
        return [pid for port in self._logs.scan(role) for pid in self.find(server_pattern(port))]

    def wait(self, deadline_s: float) -> int | None:
        """Exit status, or None when the run did not end within the deadline (then it
        and its whole tree are killed, so a hung run never outlives the bench)."""
        assert self.proc is not None
        end = time.monotonic() + deadline_s
        while self.proc.poll() is None and time.monotonic() < end:
            self.descendants()
            time.sleep(0.5)
        if self.proc.poll() is None:
            self.kill_tree()
            return None
        return self.proc.returncode

    def signal(self, sig: signal.Signals) -> None:
        self.descendants()
        os.kill(self.pid, sig)

    def signal_pid(self, pid: int, sig: signal.Signals) -> None:
        """Signal one of the run's processes (a replica, a guest server)."""
        self.descendants()
        try:
            os.kill(pid, sig)
        except OSError:
            pass

    def corrupt_a_screenshot(self, deadline_s: float = 60.0) -> bool:
        """Have a guest serve a truncated screenshot to an episode (the guest's fault
        hook, armed by CUA_GUEST_FAULT_HOOKS=1 in the run's environment): a trigger
        file goes into each live desktop's home, again after a reset restored the
        home without it, until the store shows an episode aborted by a corrupt image;
        then the other triggers are removed. False if none did before the deadline."""
        from cua_rl.desktop.providers.local.provider import record_alive

        def corrupt_aborts() -> int:
            reasons = (store_summary(self.run_dir) or {}).get("reasons", {}).get("abort", {})
            return sum(
                entry["count"]
                for reason, entry in reasons.items()
                if reason.startswith("CorruptImageError")
            )

        before = corrupt_aborts()
        triggers: set[Path] = set()
        end = time.monotonic() + deadline_s
        while not (hit := corrupt_aborts() > before) and time.monotonic() < end:
            for record in st.list_records(self.state_dir):
                trigger = Path(st.live_home(record)) / TRUNCATE_TRIGGER
                if record_alive(record) and not trigger.exists():
                    with contextlib.suppress(OSError):  # the home is being restored now
                        trigger.write_bytes(b"")
                        triggers.add(trigger)
            time.sleep(0.3)
        for trigger in triggers:
            trigger.unlink(missing_ok=True)
        return hit

    def kill_tree(self) -> None:
        """SIGKILL the run and every descendant seen (cleanup after a hung run)."""
        self.descendants()
        for pid in [self.pid, *(pid for pid in self.seen if self.is_ours(pid))]:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        assert self.proc is not None
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass

    def leftovers(self, grace_s: float = LEFTOVER_GRACE_S) -> dict[str, Any]:
        """What still runs after the run ended: descendants seen and live desktops of
        its state dir, polled for up to `grace_s` while they stop by themselves."""

        def left() -> dict[str, Any] | None:
            procs = {pid: cmd for pid, cmd in self.seen.items() if self.is_ours(pid)}
            from cua_rl.desktop.providers.local.provider import record_alive

            desktops = [r.id for r in st.list_records(self.state_dir) if record_alive(r)]
            return (
                None if not procs and not desktops else {"processes": procs, "desktops": desktops}
            )

        remaining = left()
        if remaining is not None:
            end = time.monotonic() + grace_s
            while remaining is not None and time.monotonic() < end:
                time.sleep(0.5)
                remaining = left()
        return remaining or {"processes": {}, "desktops": []}

    def summary(self) -> dict[str, Any] | None:
        """The run's own JSON summary (stdout), None when it printed none."""
        try:
            return json.loads(self.out_path.read_text())
        except (OSError, ValueError):
            return None

    def error_lines(self) -> list[str]:
        """The run's stderr lines that report an error (`Error: ...`, tracebacks)."""
        try:
            text = self.err_path.read_text(errors="replace")
        except OSError:
            return []
        return [line for line in text.splitlines() if line.startswith(("Error:", "Traceback"))]


def store_summary(run_dir: Path) -> dict[str, Any] | None:
    """`runs show --json` of the run, None when there is no readable store."""
    from cua_rl.errors import StoreError
    from cua_rl.store.run_store import RunStore

    try:
        store = RunStore.read_only(run_dir)
    except StoreError:
        return None
    try:
        return store.summary()
    except Exception:  # noqa: BLE001 - a damaged store is a finding, not a bench crash
        return None
    finally:
        store.close()
