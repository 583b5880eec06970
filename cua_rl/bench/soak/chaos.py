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
- `malformed_answer` (when the soak gives a fault proxy, `soak.malformed`): the next
  chat answers of one replica of either pool come back malformed through the proxy
  the run's model clients use. Recovered: they were all served, a later request to
  that replica was answered well, and the run made progress;
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

The kinds, their victims and the recovery test are in soak/injections.py; this module
draws the schedule and injects.
"""

from __future__ import annotations

import random
import signal
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from cua_rl.bench.faults.watched_run import RunProcess, server_pattern
from cua_rl.bench.soak.hostile import HostilePlayer
from cua_rl.bench.soak.injections import (
    CORRUPT,
    HANG,
    HANG_S,
    HOSTILE,
    RECOVER_DEADLINE_S,
    RESTART,
    VICTIMS,
    Injection,
    Restart,
    recovered,
    replica_victims,
    serves_health,
)
from cua_rl.bench.soak.malformed import MALFORMED, MalformedAnswers

TARGET_WAIT_S = 30.0
"""How long a drawn kind waits for a live target (a desktop, a replica) before another
kind is injected in its place (the module docstring)."""


class Chaos:
    """The fault schedule of one soak and its injections (module docstring)."""

    def __init__(
        self,
        run: RunProcess,
        rate_per_min: float,
        seed: int,
        kinds: list[str] | None = None,
        *,
        log: Callable[[str], None] = print,
        recover_deadline_s: float = RECOVER_DEADLINE_S,
        restart: Restart | None = None,
        healthy: Callable[[int], bool] = serves_health,
        target_wait_s: float = TARGET_WAIT_S,
        malformed: MalformedAnswers | None = None,
    ) -> None:
        """`healthy(port)`: whether a model server answers there (tests stand in);
        `malformed`: the fault proxy of `malformed_answer` (None: not drawn)."""
        self.run, self.rate, self.restart, self.healthy = run, rate_per_min, restart, healthy
        self.target_wait_s = target_wait_s
        self.malformed = malformed
        self.waiting: tuple[str, float] | None = None
        """The drawn kind that has found no live target yet, and when it was drawn."""
        known = {
            *VICTIMS,
            *HANG,
            CORRUPT,
            *HOSTILE,
            *([RESTART] if restart else []),
            *([MALFORMED] if malformed else []),
        }
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

    def _recovered(self, fault: Injection, progress: float | None) -> bool:
        if fault.kind != MALFORMED:
            return recovered(self.run, fault, progress, self.healthy)
        assert self.malformed is not None
        self.malformed.follow(fault.extra, self._role_replicas)
        return self.malformed.answered_well() and progress is not None and progress > fault.after

    def _role_replicas(self, role: str) -> list[tuple[int, int | None]]:
        return replica_victims(role)(self.run)

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
                if self._recovered(fault, progress):
                    fault.recovered, fault.recover_s = True, round(t - fault.t, 1)
                    self.log(
                        f"chaos: {fault.kind} (pid {fault.pid}) recovered in {fault.recover_s} s"
                    )
                elif t - fault.t > self.recover_deadline_s:
                    fault.recovered = False
                    self.log(
                        f"chaos: {fault.kind} (pid {fault.pid}) NOT recovered within "
                        f"{self.recover_deadline_s:.0f} s"
                    )
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
        self.skipped.append(
            {"t": round(t, 1), "drawn": drawn, "why": "every kind pending or without a live target"}
        )

    def _try(self, kind: str, t: float, first: str) -> bool:
        """Inject `kind` now (`first`: the kind the slot drew); False when it has no
        live target."""
        if kind == RESTART:
            self._restart(t, first)
            return True
        if kind == CORRUPT or kind in HOSTILE:
            return self._in_desktop(t, kind, first)
        if kind == MALFORMED:
            assert self.malformed is not None
            chose = self.malformed.arm(self._role_replicas, self.victim_rng)
            if chose is None:
                return False
            fault = Injection(
                round(t, 1),
                kind,
                chose["pid"],
                f"next chat answers of {chose['role']} replica port {chose['port']} malformed",
                t,
                run_pid=self.run.pid,
            )
            fault.extra.update(chose, drawn=first)
            self.injections.append(fault)
            self.log(f"chaos: t={t:.0f}s {kind}: {fault.detail}")
            return True
        find = replica_victims(HANG[kind]) if kind in HANG else VICTIMS[kind]
        candidates = sorted(find(self.run))
        if not candidates:
            return False
        pid, port = self.victim_rng.choice(candidates)
        sig = signal.SIGSTOP if kind in HANG else signal.SIGKILL
        self.run.signal_pid(pid, sig)
        fault = Injection(
            round(t, 1),
            kind,
            pid,
            f"{sig.name} pid {pid}" + (f" (port {port})" if port else ""),
            t,
            port,
            run_pid=self.run.pid,
        )
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
            if (
                fault.kind not in HANG
                or fault.extra.get("continued") is not None
                or (not now and t < fault.t + HANG_S)
            ):
                continue
            assert fault.port is not None
            live = fault.run_pid == self.run.pid and fault.pid in self.run.find(
                server_pattern(fault.port)
            )
            if live:
                self.run.signal_pid(fault.pid, signal.SIGCONT)
            fault.extra["continued"] = round(t, 1)
            fault.extra["replaced_while_stopped"] = not live
            self.log(
                f"chaos: t={t:.0f}s {fault.kind}: "
                + (
                    f"SIGCONT pid {fault.pid}"
                    if live
                    else f"pid {fault.pid} was replaced while stopped"
                )
            )

    def _in_desktop(self, t: float, kind: str, drawn: str) -> bool:
        """A corrupt screenshot or a hostile program in a live desktop of the run;
        False when there is none."""
        from cua_rl.bench.faults.watched_run import TRUNCATE_TRIGGER
        from cua_rl.desktop.providers.local import state as st
        from cua_rl.desktop.providers.local.provider import record_alive

        state_dir = getattr(self.run, "state_dir", None)
        live = sorted(
            (
                (r.pid, r.id, r)
                for r in (st.list_records(state_dir) if state_dir else [])
                if record_alive(r)
            ),
            key=lambda item: item[:2],
        )
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
        fault = Injection(
            round(t, 1),
            RESTART,
            old,
            f"SIGTERM pid {old}: exit "
            f"{took.get('exit')} in {took.get('stop_s')} s, resumed as pid "
            f"{self.run.pid}",
            t + time.monotonic() - began,
        )
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
                fault.recovered = self._recovered(fault, progress)
                if fault.recovered:
                    fault.recover_s = round(t - fault.t, 1)

    def results(self) -> list[dict[str, Any]]:
        return [asdict(f) for f in self.injections]
