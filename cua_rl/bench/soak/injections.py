"""The faults a soak injects (`bench soak --chaos`, soak/chaos.py), one by one: the
record of an injection, the kinds and how each finds its victims in the run's process
tree, and whether a fault has recovered (the run made progress since it, and a killed
or stopped replica's port is served again).

It is apart from soak/chaos.py, which draws the schedule and injects: what a fault is
and when it counts as recovered is also what the Ray soak (soak/ray_nodes.py) and the
soak runner read, without the schedule.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cua_rl.bench.faults.watched_run import RunProcess, server_pattern
from cua_rl.bench.soak.hostile import PROGRAMS
from cua_rl.bench.soak.malformed import MALFORMED
from cua_rl.store.run_store import RunStore

RECOVER_DEADLINE_S = 300.0
"""A fault not recovered this long after its injection counts as not recovered."""
HANG_S = 90.0
"""How long a `*_replica_hang` keeps its replica stopped (SIGSTOP, then SIGCONT)."""


def store_progress(run_dir: Path) -> tuple[int, float | None]:
    """Good trajectories in the store and when the newest-started of them started
    (epoch seconds; (0, None) while there is no store or it is busy). One aggregate
    query: the driver asks every tick for the whole soak."""
    try:
        store = RunStore.read_only(run_dir)
    except Exception:  # noqa: BLE001 - no store yet
        return 0, None
    try:
        good, newest = store.query(
            lambda db: db.execute(
                "SELECT COUNT(*), MAX(started_at) FROM trajectories "
                "WHERE status NOT IN ('aborted', 'setup_failed')"
            ).fetchone()
        )
    except Exception:  # noqa: BLE001 - busy: read again at the next tick
        return 0, None
    finally:
        store.close()
    return int(good), newest


@dataclass
class Injection:
    """One fault: when (seconds since the run started), what, on which process."""

    t: float
    kind: str
    pid: int
    detail: str
    after: float
    """Progress is a good trajectory started after this (seconds since the run started)."""
    port: int | None = None
    recovered: bool | None = None
    """None while pending; True/False once decided."""
    recover_s: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    run_pid: int = 0
    """The run invocation it went into: a `sigterm_resume` since starts new replicas
    on new ports."""


def replica_victims(role: str) -> Callable[[RunProcess], list[tuple[int, int | None]]]:
    def victims(run: RunProcess) -> list[tuple[int, int | None]]:
        out = []
        for pid in run.replica_pids(role):
            port = re.search(r"--port[ =](\d+)", run.seen.get(pid, ""))
            out.append((pid, int(port.group(1)) if port else None))
        return out

    return victims


def _matching(pattern: str) -> Callable[[RunProcess], list[tuple[int, int | None]]]:
    return lambda run: [(pid, None) for pid in run.find(pattern)]


VICTIMS: dict[str, Callable[[RunProcess], list[tuple[int, int | None]]]] = {
    "policy_replica_kill": replica_victims("policy"),
    "prm_replica_kill": replica_victims("prm"),
    "guest_kill": _matching(r"-m cua_guest(\s|$)"),
    "xvfb_kill": _matching(r"(^|/)Xvfb\s"),
}
"""Every injector that kills a process: the live candidates (pid, port) of a run."""
HANG = {"policy_replica_hang": "policy", "prm_replica_hang": "prm"}
"""Injectors that stop a replica (SIGSTOP) for HANG_S and continue it."""
CORRUPT = "corrupt_screenshot"
HOSTILE = tuple(PROGRAMS)
RESTART = "sigterm_resume"
LOCAL_KINDS = [*VICTIMS, *HANG, CORRUPT, *HOSTILE, MALFORMED, RESTART]
"""Every kind a soak on local desktops draws from (`--faults`)."""
Restart = Callable[[float], tuple[RunProcess, dict[str, Any]]]
"""Stops the run (SIGTERM) at soak time t and resumes it: the resumed run and what
the stop took (exit status, seconds, processes left)."""


def recovered(
    run: RunProcess,
    fault: Injection,
    progress: float | None,
    healthy: Callable[[int], bool] | None = None,
) -> bool:
    """The run made progress since the fault (`progress`: when the newest-started good
    trajectory started), and a killed replica's port is served again: a new process
    on it answers /health. A process that is still loading is not enough: the run's
    supervision gives a replica a budget of restarts per incident, and a soak that
    killed one while it loaded (under load a vLLM start takes minutes) spent that
    budget in three kills and the pool was given up."""
    if progress is None or progress <= fault.after:
        return False
    if fault.port is None:
        return True
    answers = healthy or serves_health
    if fault.run_pid and fault.run_pid != run.pid:  # resumed since: a replica of the role
        role = fault.kind.removesuffix("_replica_kill").removesuffix("_replica_hang")
        return any(port is not None and answers(port) for _, port in replica_victims(role)(run))
    if fault.kind in HANG:  # the stopped process may come back itself
        return fault.extra.get("continued") is not None and answers(fault.port)
    return any(pid != fault.pid for pid in run.find(server_pattern(fault.port))) and answers(
        fault.port
    )


def serves_health(port: int) -> bool:
    """Whether the model server on loopback `port` answers /health (open to all)."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as reply:
            return bool(reply.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False
