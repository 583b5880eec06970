"""Faults injected into ONE live run at a seeded random rate (`bench soak --chaos`).

`bench faults` (faults/catalog.py) starts one short run per fault; a soak injects
into a single run for its whole length, as production meets faults. Each injector
finds its victim in the run's process tree (`RunProcess.find`, `replica_pids`) and
signals it from outside (`RunProcess.signal_pid`), like the catalog's kills:

- `policy_replica_kill`, `prm_replica_kill`: SIGKILL a model-server replica; the
  run's supervision restarts it on the same port (docs/faults.md). Recovered: a
  new process on that port answers /health and the run made progress (below);
- `policy_replica_hang`, `prm_replica_hang`: SIGSTOP a model-server replica for
  HANG_S, then SIGCONT it: a server that takes requests and never answers. HANG_S
  is longer than the supervision's `unresponsive_after_s` (60 s by default), so the
  run is expected to find it unresponsive by /health and restart it; the requests
  it held fail and are retried. Recovered: a process on that port answers /health
  (the restarted one, or the stopped one once continued) and the run made progress;
- `guest_kill`: SIGKILL a desktop's guest server; the episode on it aborts and the
  desktop is reset. Recovered: the run made progress;
- `xvfb_kill`: SIGKILL a desktop's X server; the same recovery;
- `corrupt_screenshot`: the guest of a live desktop serves its next screenshot cut in
  half (the guest's fault hook, armed by `CUA_GUEST_FAULT_HOOKS=1` in the run's
  environment: a trigger file in the desktop's home, as `RunProcess.corrupt_a_screenshot`
  does); the episode aborts on the corrupt image. Recovered: the run made progress.
  A reset that restores the home first takes the trigger with it: whether it
  landed is counted from the store's aborts (`corrupt_screenshots_landed`);
- `fork_loop`, `disk_fill`, `memory_hog`: a hostile program run inside a live desktop
  through its guest's `/execute`, as a policy's action would (`soak.hostile`):
  whether the desktop's limits held is recorded (`contained`). Recovered: the run
  made progress;
- `sigterm_resume` (when the soak gives a `restart`): SIGTERM the run, wait for it to
  exit, `--resume` it; recovered once the resumed run made progress. From then on
  the resumed run is the one faults go into.

Progress after a fault: a good trajectory that *started* after it (after the resume,
for `sigterm_resume`) has been stored. Episodes already running when the fault came
(on another desktop, or finishing while the run stops) are not progress.

The schedule is a Poisson process: gaps between faults are exponential with mean
1/rate minutes and each fault's kind is drawn uniformly, from `random.Random(seed)`,
so a seed replays the same schedule (the victims are drawn from a second stream
seeded the same, among the live candidates sorted by pid). A kind whose last fault
has not recovered yet is not injected again (another kind is drawn; none left:
the slot is skipped and counted), so one slow recovery never piles up kills of
the same part. A drawn kind with no live target at its slot (every desktop being
reset after the replicas were killed, say) is tried again at each tick for up to
TARGET_WAIT_S before another kind stands in, and the later slots move by the wait:
substituting at once made a seed's kinds depend on how fast the machine resets its
desktops. Faults start once the run has stored its first good trajectory.
"""

from __future__ import annotations

import random
import re
import signal
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cua_rl.bench.faults.watched_run import RunProcess, server_pattern
from cua_rl.bench.soak.hostile import PROGRAMS, HostilePlayer
from cua_rl.store.run_store import RunStore

RECOVER_DEADLINE_S = 300.0
"""A fault not recovered this long after its injection counts as not recovered."""
HANG_S = 90.0
"""How long a `*_replica_hang` keeps its replica stopped (SIGSTOP, then SIGCONT)."""
TARGET_WAIT_S = 30.0
"""How long a drawn kind waits for a live target (a desktop, a replica) before another
kind is injected in its place (the module docstring)."""


def store_progress(run_dir: Path) -> tuple[int, float | None]:
    """Good trajectories in the store and when the newest-started of them started
    (epoch seconds; (0, None) while there is no store or it is busy). One aggregate
    query: the driver asks every tick for the whole soak."""
    try:
        store = RunStore.read_only(run_dir)
    except Exception:  # noqa: BLE001 - no store yet
        return 0, None
    try:
        good, newest = store.query(lambda db: db.execute(
            "SELECT COUNT(*), MAX(started_at) FROM trajectories "
            "WHERE status NOT IN ('aborted', 'setup_failed')").fetchone())
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


def _replica_victims(role: str) -> Callable[[RunProcess], list[tuple[int, int | None]]]:
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
    "policy_replica_kill": _replica_victims("policy"),
    "prm_replica_kill": _replica_victims("prm"),
    "guest_kill": _matching(r"-m cua_guest(\s|$)"),
    "xvfb_kill": _matching(r"(^|/)Xvfb\s"),
}
"""Every injector that kills a process: the live candidates (pid, port) of a run."""
HANG = {"policy_replica_hang": "policy", "prm_replica_hang": "prm"}
"""Injectors that stop a replica (SIGSTOP) for HANG_S and continue it."""
CORRUPT = "corrupt_screenshot"
HOSTILE = tuple(PROGRAMS)
RESTART = "sigterm_resume"
LOCAL_KINDS = [*VICTIMS, *HANG, CORRUPT, *HOSTILE, RESTART]
"""Every kind a soak on local desktops draws from (`--faults`)."""
Restart = Callable[[float], tuple[RunProcess, dict[str, Any]]]
"""Stops the run (SIGTERM) at soak time t and resumes it: the resumed run and what
the stop took (exit status, seconds, processes left)."""


def recovered(run: RunProcess, fault: Injection, progress: float | None,
              healthy: Callable[[int], bool] | None = None) -> bool:
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
        return any(port is not None and answers(port)
                   for _, port in _replica_victims(role)(run))
    if fault.kind in HANG:  # the stopped process may come back itself
        return fault.extra.get("continued") is not None and answers(fault.port)
    return (any(pid != fault.pid for pid in run.find(server_pattern(fault.port)))
            and answers(fault.port))


def serves_health(port: int) -> bool:
    """Whether the model server on loopback `port` answers /health (open to all)."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as reply:
            return bool(reply.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


class Chaos:
    """The fault schedule of one soak and its injections (module docstring)."""

    def __init__(self, run: RunProcess, rate_per_min: float, seed: int,
                 kinds: list[str] | None = None, *, log: Callable[[str], None] = print,
                 recover_deadline_s: float = RECOVER_DEADLINE_S,
                 restart: Restart | None = None,
                 healthy: Callable[[int], bool] = serves_health,
                 target_wait_s: float = TARGET_WAIT_S) -> None:
        """`healthy(port)`: whether a model server answers there (tests stand in)."""
        self.run, self.rate, self.restart, self.healthy = run, rate_per_min, restart, healthy
        self.target_wait_s = target_wait_s
        self.waiting: tuple[str, float] | None = None
        """The drawn kind that has found no live target yet, and when it was drawn."""
        known = {*VICTIMS, *HANG, CORRUPT, *HOSTILE, *([RESTART] if restart else [])}
        self.kinds = sorted(kinds or known)
        unknown = set(self.kinds) - known
        if unknown:
            raise ValueError(f"unknown fault kind(s) {sorted(unknown)}; known: {sorted(known)}")
        self.schedule_rng, self.victim_rng = random.Random(seed), random.Random(seed)
        self.log, self.recover_deadline_s = log, recover_deadline_s
        self.injections: list[Injection] = []
        self.skipped: list[dict[str, Any]] = []
        self.next_t: float | None = None
        self.hostile = HostilePlayer()

    def _gap_s(self) -> float:
        return 60.0 * self.schedule_rng.expovariate(self.rate)

    def tick(self, t: float, progress: float | None, *, inject: bool) -> None:
        """Decide pending recoveries; inject when a fault is due and `inject` (the run
        has made progress and the quiet end of the soak has not begun). `t`, `progress`:
        seconds since the run started, now and when the newest-started good
        trajectory started."""
        self._continue_hung(t)
        for fault in self.injections:
            if fault.recovered is None:
                if recovered(self.run, fault, progress, self.healthy):
                    fault.recovered, fault.recover_s = True, round(t - fault.t, 1)
                    self.log(f"chaos: {fault.kind} (pid {fault.pid}) recovered in "
                             f"{fault.recover_s} s")
                elif t - fault.t > self.recover_deadline_s:
                    fault.recovered = False
                    self.log(f"chaos: {fault.kind} (pid {fault.pid}) NOT recovered within "
                             f"{self.recover_deadline_s:.0f} s")
        if self.rate <= 0 or not inject:
            return
        if self.next_t is None:
            self.next_t = t + self._gap_s()
        if t < self.next_t:
            return
        self.next_t += self._gap_s()
        self._inject(t)

    def _inject(self, t: float) -> None:
        """The due slot's fault: the drawn kind, once it has a live target (for up to
        `target_wait_s`), else another kind that is not pending and has one."""
        if self.waiting is None:
            self.waiting = (self.schedule_rng.choice(self.kinds), t)
        first, drawn_at = self.waiting
        pending = {f.kind for f in self.injections if f.recovered is None}
        injected = first not in pending and self._try(first, t, first)
        if not injected and first not in pending and t - drawn_at < self.target_wait_s:
            return  # no live target yet: again at the next tick
        others = [k for k in self.kinds if k != first and k not in pending]
        if not injected and not any(self._try(kind, t, first) for kind in others):
            self._skip(t, first)
        # the slot is decided: later slots move by the time it waited for a target
        self.waiting = None
        if self.next_t is not None:
            self.next_t += t - drawn_at

    def _skip(self, t: float, drawn: str) -> None:
        self.skipped.append({"t": round(t, 1), "drawn": drawn,
                             "why": "every kind pending or without a live target"})

    def _try(self, kind: str, t: float, first: str) -> bool:
        """Inject `kind` now (`first`: the kind the slot drew); False when it has no
        live target."""
        if kind == RESTART:
            self._restart(t, first)
            return True
        if kind == CORRUPT or kind in HOSTILE:
            return self._in_desktop(t, kind, first)
        find = _replica_victims(HANG[kind]) if kind in HANG else VICTIMS[kind]
        candidates = sorted(find(self.run))
        if not candidates:
            return False
        pid, port = self.victim_rng.choice(candidates)
        sig = signal.SIGSTOP if kind in HANG else signal.SIGKILL
        self.run.signal_pid(pid, sig)
        fault = Injection(round(t, 1), kind, pid, f"{sig.name} pid {pid}"
                          + (f" (port {port})" if port else ""), t, port,
                          run_pid=self.run.pid)
        if kind in HANG:
            fault.extra["continued"] = None
        fault.extra["drawn"] = first
        self.injections.append(fault)
        self.log(f"chaos: t={t:.0f}s {kind}: {fault.detail}")
        return True

    def _continue_hung(self, t: float, *, now: bool = False) -> None:
        """SIGCONT each replica stopped HANG_S ago (every one, `now`), unless the run
        has replaced it meanwhile (its pid is no longer the server on that port)."""
        for fault in self.injections:
            if (fault.kind not in HANG or fault.extra.get("continued") is not None
                    or (not now and t < fault.t + HANG_S)):
                continue
            assert fault.port is not None
            live = fault.run_pid == self.run.pid and fault.pid in self.run.find(
                server_pattern(fault.port))
            if live:
                self.run.signal_pid(fault.pid, signal.SIGCONT)
            fault.extra["continued"] = round(t, 1)
            fault.extra["replaced_while_stopped"] = not live
            self.log(f"chaos: t={t:.0f}s {fault.kind}: " + (
                f"SIGCONT pid {fault.pid}" if live else
                f"pid {fault.pid} was replaced while stopped"))

    def _in_desktop(self, t: float, kind: str, drawn: str) -> bool:
        """A corrupt screenshot or a hostile program in a live desktop of the run;
        False when there is none."""
        from cua_rl.bench.faults.watched_run import TRUNCATE_TRIGGER
        from cua_rl.desktop.providers.local import state as st
        from cua_rl.desktop.providers.local.provider import record_alive

        state_dir = getattr(self.run, "state_dir", None)
        live = sorted(((r.pid, r.id, r) for r in
                       (st.list_records(state_dir) if state_dir else []) if record_alive(r)),
                      key=lambda item: item[:2])
        if not live:
            return False
        pid, desktop, record = self.victim_rng.choice(live)
        if kind == CORRUPT:
            try:
                (Path(st.live_home(record)) / TRUNCATE_TRIGGER).write_bytes(b"")
            except OSError:  # the home is being restored now
                return False
            detail = f"next screenshot of {desktop} cut"
        else:
            detail = f"{kind} in {desktop} as its agent"
        fault = Injection(round(t, 1), kind, pid, detail, t)
        fault.extra["drawn"] = drawn
        if kind != CORRUPT:
            self.hostile.start(kind, record.url, record.token, fault.extra)
        self.injections.append(fault)
        self.log(f"chaos: t={t:.0f}s {kind}: {fault.detail}")
        return True

    def _restart(self, t: float, drawn: str) -> None:
        assert self.restart is not None
        self._continue_hung(t, now=True)  # a stopped replica would hold up the stop
        old = self.run.pid
        self.log(f"chaos: t={t:.0f}s {RESTART}: SIGTERM pid {old}, then --resume")
        began = time.monotonic()
        self.run, took = self.restart(t)
        fault = Injection(round(t, 1), RESTART, old, f"SIGTERM pid {old}: exit "
                          f"{took.get('exit')} in {took.get('stop_s')} s, resumed as pid "
                          f"{self.run.pid}", t + time.monotonic() - began)
        fault.extra.update(took, drawn=drawn)
        self.injections.append(fault)

    def finish(self, t: float, progress: float | None) -> None:
        """Decide what is still pending (at the end of the soak): recovered now or not.
        Hostile programs still running are waited for (each has a deadline)."""
        self.hostile.close()
        self._continue_hung(t, now=True)
        if self.waiting is not None:  # the quiet end came while it waited for a target
            self._skip(t, self.waiting[0])
            self.waiting = None
        for fault in self.injections:
            if fault.recovered is None:
                fault.recovered = recovered(self.run, fault, progress, self.healthy)
                if fault.recovered:
                    fault.recover_s = round(t - fault.t, 1)

    def results(self) -> list[dict[str, Any]]:
        return [asdict(f) for f in self.injections]

