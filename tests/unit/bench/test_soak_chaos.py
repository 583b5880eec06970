"""`bench soak --chaos` on a stand-in run (its process table is a dict): a seed
replays the same schedule, a kind whose fault has not recovered is not injected
again, a replica kill recovers only once its port is served by a new process and
the run made progress (a good trajectory that started after the fault), and nothing
is injected before the run works. `progress` below: when the newest-started good
trajectory started, in seconds since the run started."""

from __future__ import annotations

import itertools
import re
import signal
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from cua_rl.bench.soak.chaos import Chaos
from cua_rl.bench.soak.injections import HANG_S, serves_health


@dataclass
class FakeRun:
    """What the injectors use of a `RunProcess`: find, replica_pids, seen, signal_pid."""

    seen: dict[int, str] = field(
        default_factory=lambda: {
            10: "python -m cua_rl.cli serve --engine hf --port 5000",
            11: "python -m cua_rl.cli serve --engine hf --port 5001",
            20: "/opt/cua-guest/bin/python -m cua_guest --listen-fd 3",
            21: "/opt/cua-guest/bin/python -m cua_guest --listen-fd 3",
            30: "Xvfb :200 -screen 0 1920x1080x24",
        }
    )
    killed: list[int] = field(default_factory=list)
    signals: list[tuple[int, signal.Signals]] = field(default_factory=list)
    pid: int = 1

    def find(self, pattern: str) -> list[int]:
        return [
            pid
            for pid, cmd in self.seen.items()
            if re.search(pattern, cmd) and pid not in self.killed
        ]

    def replica_pids(self, role: str) -> list[int]:
        port = {"policy": 5000, "prm": 5001}[role]
        return self.find(rf" serve .*--port {port}\b")

    def signal_pid(self, pid: int, sig: signal.Signals) -> None:
        self.signals.append((pid, sig))
        if sig == signal.SIGKILL:
            self.killed.append(pid)


PROCESS_KINDS = [
    "policy_replica_kill",
    "prm_replica_kill",
    "policy_replica_hang",
    "prm_replica_hang",
    "guest_kill",
    "xvfb_kill",
]
"""The kinds the stand-in run has targets for (it has no desktop records)."""


def _chaos(*args: Any, **kwargs: Any) -> Chaos:
    """A schedule whose restarted replicas answer /health as soon as they exist."""
    return Chaos(*args, healthy=lambda port: True, **kwargs)


def _drive(chaos: Chaos, run: FakeRun, seconds: int, armed_at: int = 0) -> None:
    for t in range(seconds):
        chaos.tick(float(t), t - 3.0, inject=t >= armed_at)  # an episode lasts 3 s
        for fault in chaos.injections:  # every victim comes back 5 s later
            if t == int(fault.t) + 5:
                run.seen[1000 + fault.pid] = run.seen[fault.pid]


def _schedule(seed: int) -> list[tuple[float, str]]:
    run = FakeRun()
    chaos = _chaos(run, 2.0, seed, kinds=PROCESS_KINDS, log=lambda _: None)
    _drive(chaos, run, 600)
    return [(f.t, f.kind) for f in chaos.injections]


def test_a_seed_replays_the_same_schedule() -> None:
    first = _schedule(7)
    assert first == _schedule(7) and first != _schedule(8)
    assert 10 <= len(first) <= 30  # about 2 per minute over 10 minutes
    assert {kind for _, kind in first} == set(PROCESS_KINDS)


def test_nothing_is_injected_before_the_run_works() -> None:
    run = FakeRun()
    chaos = _chaos(run, 5.0, 1, kinds=PROCESS_KINDS, log=lambda _: None)
    _drive(chaos, run, 120, armed_at=100)
    assert chaos.injections and min(f.t for f in chaos.injections) >= 100


def test_a_replica_kill_recovers_with_a_new_server_and_progress() -> None:
    run = FakeRun()
    chaos = _chaos(run, 60.0, 0, kinds=["policy_replica_kill"], log=lambda _: None)
    for t in range(10):  # one fault a second on average
        chaos.tick(float(t), 0.0, inject=True)
    [fault] = chaos.injections
    assert run.killed == [10] and fault.port == 5000 and fault.recovered is None
    for t in range(10, 20):  # progress, but no server on the port: pending
        chaos.tick(float(t), t - 1.0, inject=True)
    assert fault.recovered is None and len(chaos.injections) == 1  # not killed again
    assert chaos.skipped  # the only kind is pending: its slots are skipped
    run.seen[99] = run.seen[10]
    chaos.tick(20.0, 19.0, inject=False)
    assert fault.recovered and fault.recover_s == 20.0 - fault.t


def test_an_episode_that_started_before_the_fault_is_no_progress() -> None:
    run = FakeRun()
    chaos = _chaos(run, 60.0, 0, kinds=["guest_kill"], log=lambda _: None)
    for t in range(10):
        chaos.tick(float(t), 0.0, inject=True)
    [fault] = chaos.injections
    chaos.tick(30.0, fault.t - 0.5, inject=False)  # stored now, started before the kill
    assert fault.recovered is None
    chaos.tick(31.0, fault.t + 0.5, inject=False)
    assert fault.recovered


def test_a_fault_without_recovery_is_decided_at_its_deadline_or_the_end() -> None:
    run = FakeRun()
    chaos = _chaos(run, 60.0, 0, kinds=["guest_kill"], log=lambda _: None, recover_deadline_s=30)
    for t in range(10):
        chaos.tick(float(t), 0.0, inject=True)
    assert len(chaos.injections) == 1
    chaos.tick(45.0, 0.0, inject=False)  # no progress for over 30 s
    assert [f.recovered for f in chaos.injections] == [False]
    for t in range(46, 56):
        chaos.tick(float(t), 0.0, inject=True)
    chaos.finish(60.0, 59.0)  # the second one: progress by the end
    assert [f.recovered for f in chaos.injections] == [False, True]


def test_a_sigterm_and_resume_switches_the_run_faults_go_into() -> None:
    first, resumed = FakeRun(), FakeRun(seen={40: "python -m cua_guest --listen-fd 3"})
    stops: list[float] = []

    def restart(t: float) -> tuple[FakeRun, dict[str, Any]]:
        stops.append(t)
        time.sleep(0.05)  # the stop and the resume take time: progress counts after them
        return resumed, {"exit": 1, "stop_s": 4.0, "left": 0}

    chaos = _chaos(
        first, 60.0, 0, kinds=["sigterm_resume", "guest_kill"], log=lambda _: None, restart=restart
    )  # type: ignore[arg-type]
    t = 0
    while len(chaos.injections) < 3 and t < 200:
        chaos.tick(float(t), t - 0.5, inject=True)  # progress every second: all recover
        t += 1
    kinds = [f.kind for f in chaos.injections]
    assert "sigterm_resume" in kinds and chaos.run is resumed and stops
    restarted = kinds.index("sigterm_resume")
    assert chaos.injections[restarted].extra == {
        "exit": 1,
        "stop_s": 4.0,
        "left": 0,
        "drawn": "sigterm_resume",
    }
    # guest kills after the resume went into the resumed run
    assert all(f.pid == 40 for f in chaos.injections[restarted + 1 :] if f.kind == "guest_kill")
    assert all(f.recovered for f in chaos.injections[:-1])
    resume = chaos.injections[restarted]
    assert resume.after >= resume.t + 0.05  # fresh episodes of the resumed run only


def test_sigterm_resume_needs_a_restart() -> None:
    try:
        _chaos(FakeRun(), 1.0, 0, kinds=["sigterm_resume"])  # type: ignore[arg-type]
    except ValueError as exc:
        assert "sigterm_resume" in str(exc)
    else:
        raise AssertionError("accepted a restart fault without a restart")


def test_a_replica_is_back_only_once_it_answers_health() -> None:
    """A restarted replica that is still loading is not recovered: the soak would kill
    it again and spend the run's restart budget for one incident."""
    import http.server
    import threading

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self.send_response(200 if self.path == "/health" else 404)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        assert serves_health(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
    assert not serves_health(server.server_address[1])  # nothing listens there now

    run = FakeRun()
    chaos = Chaos(
        run, 60.0, 0, kinds=["policy_replica_kill"], log=lambda _: None, healthy=lambda port: False
    )
    for t in range(10):
        chaos.tick(float(t), 0.0, inject=True)
    [fault] = chaos.injections
    run.seen[1000 + fault.pid] = run.seen[fault.pid]  # restarted, still loading
    chaos.tick(20.0, 15.0, inject=False)
    assert fault.recovered is None


@pytest.mark.parametrize("kind", ["policy_replica_kill", "policy_replica_hang"])
def test_a_replica_fault_before_a_resume_recovers_with_the_resumed_runs_replica(kind: str) -> None:
    """A `sigterm_resume` while a replica kill or hang is pending: the resumed run serves
    that pool from new processes on new ports, which is the replica back (an hour-long
    soak counted two such kills not recovered)."""
    first = FakeRun()
    resumed = FakeRun(seen={50: "python -m cua_rl.cli serve --engine hf --port 6000"}, pid=2)
    resumed.replica_pids = lambda role: resumed.find(r" serve .*--port 6000\b")  # type: ignore[method-assign]
    chaos = Chaos(
        first,
        60.0,
        0,
        kinds=[kind],
        log=lambda _: None,  # type: ignore[arg-type]
        healthy=lambda port: port == 6000,
    )  # the old port serves nothing now
    for t in range(10):
        chaos.tick(float(t), 0.0, inject=True)
    [fault] = chaos.injections
    assert fault.run_pid == first.pid and fault.port == 5000
    chaos._continue_hung(10.0, now=True)  # what a restart does first
    chaos.run = resumed  # type: ignore[assignment]
    chaos.tick(30.0, 25.0, inject=False)
    assert fault.recovered is True


def test_a_hung_replica_is_continued_after_its_stop_and_then_recovers() -> None:
    """A replica stopped (SIGSTOP) is continued HANG_S later; progress and a served
    port before then are not recovery (the stop has not ended)."""
    run = FakeRun()
    chaos = _chaos(run, 60.0, 0, kinds=["prm_replica_hang"], log=lambda _: None)
    for t in range(10):
        chaos.tick(float(t), 0.0, inject=True)
    [fault] = chaos.injections
    assert run.signals == [(11, signal.SIGSTOP)] and fault.port == 5001
    chaos.tick(fault.t + HANG_S - 1, fault.t + HANG_S - 2, inject=False)
    assert fault.recovered is None and len(run.signals) == 1
    chaos.tick(fault.t + HANG_S, fault.t + HANG_S - 1, inject=False)
    assert run.signals[-1] == (11, signal.SIGCONT)
    assert fault.recovered and fault.extra["replaced_while_stopped"] is False


def test_a_hung_replica_the_run_replaced_is_not_continued() -> None:
    """The run found the stopped replica unresponsive and restarted it: the new
    server on the port is the recovery, and the old pid gets no SIGCONT."""
    run = FakeRun()
    chaos = _chaos(run, 60.0, 0, kinds=["policy_replica_hang"], log=lambda _: None)
    for t in range(10):
        chaos.tick(float(t), 0.0, inject=True)
    [fault] = chaos.injections
    run.killed.append(10)  # the supervision killed it ...
    run.seen[99] = run.seen[10]  # ... and started a new one on the port
    chaos.finish(fault.t + 30, fault.t + 20)  # the soak ends before HANG_S: continue now
    assert run.signals == [(10, signal.SIGSTOP)]
    assert fault.recovered and fault.extra["replaced_while_stopped"] is True


def test_a_drawn_kind_waits_for_a_target_before_another_stands_in() -> None:
    """Both guests gone (their desktops being reset, say): a drawn `guest_kill` waits
    for one for up to `target_wait_s`, and lands when a guest comes back; with none
    back by then, the other kind stands in. A seed's kinds then do not depend on how
    fast the machine resets its desktops."""
    run = FakeRun()
    run.killed += [20, 21]
    chaos = _chaos(
        run, 60.0, 0, kinds=["guest_kill", "xvfb_kill"], log=lambda _: None, target_wait_s=10
    )
    t = 0
    while chaos.waiting is None and t < 60:
        chaos.tick(float(t), 0.0, inject=True)
        t += 1
    while chaos.waiting is not None and chaos.waiting[0] != "guest_kill" and t < 60:
        chaos.tick(float(t), 0.0, inject=True)  # an xvfb_kill drawn first lands at once
        t += 1
    assert chaos.waiting is not None and chaos.waiting[0] == "guest_kill"
    drawn_at = chaos.waiting[1]
    chaos.tick(drawn_at + 5, 0.0, inject=True)
    assert chaos.waiting and all(f.kind != "guest_kill" for f in chaos.injections)
    run.seen[22] = run.seen[20]  # a desktop is back
    chaos.tick(drawn_at + 6, 0.0, inject=True)
    assert chaos.waiting is None and chaos.injections[-1].kind == "guest_kill"
    assert chaos.injections[-1].pid == 22 and chaos.injections[-1].extra["drawn"] == "guest_kill"


def test_a_kind_without_a_target_for_too_long_is_replaced_or_skipped() -> None:
    run = FakeRun()
    run.killed += [20, 21]  # no guest, ever
    chaos = _chaos(run, 60.0, 0, kinds=["guest_kill"], log=lambda _: None, target_wait_s=10)
    for t in range(30):
        chaos.tick(float(t), 0.0, inject=True)
    assert not chaos.injections and chaos.skipped  # after its wait, nothing stood in
    assert all(b["t"] - a["t"] >= 10 for a, b in itertools.pairwise(chaos.skipped))
    chaos.finish(31.0, 0.0)  # one waiting at the end is skipped, not left undecided
    assert chaos.waiting is None
