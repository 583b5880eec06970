"""One function per fault class of `cua-rl bench faults` (figures: faults/cases.py).

Every run is a real quickstart-sized run in a subprocess; faults are injected from
outside as they happen in production: a signal to a process found in the run's
process tree, a misbehaving HTTP proxy in front of a real model server, a run
directory on a full file system.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from typing import Any

from cua_rl.bench.faults.cases import (
    STOP_DEADLINE_S,
    FaultBench,
    figures,
    good_trajectories,
    model_server,
    wait_for_progress,
)
from cua_rl.bench.faults.proxy import FaultProxy, Mode
from cua_rl.bench.faults.watched_run import FAULT_HOOKS_ENV, RunProcess

ROLLOUT = ["fleet.max_groups=3"]
"""A rollout long enough that a fault lands mid-run (3 groups of 2, 3 steps each)."""

TRAIN = ["fleet.max_groups=4", "train.max_policy_updates=1"]
"""A training run cut to one update of each learner (the quickstart's full run takes
about 4 minutes on 2 cores)."""

Fault = Callable[[FaultBench], dict[str, Any]]


def _kill(pids: list[int], sig: signal.Signals = signal.SIGKILL) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def _mid_run(bench: FaultBench, run: RunProcess) -> int:
    """Wait until the run stored its first good trajectory; return the count."""
    wait_for_progress(run, bench.deadline_s)
    return good_trajectories(run.run_dir)


def replica_kill(role: str, replicas: int) -> Fault:
    """SIGKILL one `role` model replica of a training run once it has made progress."""

    def fault(bench: FaultBench) -> dict[str, Any]:
        name = f"{role}_replica_kill" + ("_2_replicas" if replicas > 1 else "")
        run = bench.run(
            name, "train", [*TRAIN, *([f"{role}.replicas={replicas}"] if replicas > 1 else [])]
        )
        before = _mid_run(bench, run)
        victims = run.replica_pids(role)[:1]
        if not victims:
            run.kill_tree()
            return figures(
                name,
                [run],
                [run.wait(5)],
                None,
                extra_ok=False,
                detail=f"no {role} replica found to kill",
            )
        bench.log(f"[{name}] SIGKILL {role} replica pid {victims[0]}")
        t0 = time.monotonic()
        _kill(victims)
        recover = wait_for_progress(run, bench.deadline_s, after=before)
        code = run.wait(max(1.0, bench.deadline_s - (time.monotonic() - t0)))
        return figures(name, [run], [code], recover)

    return fault


def guest_kill(bench: FaultBench) -> dict[str, Any]:
    """SIGKILL the guest server of one desktop in the middle of a rollout."""
    run = bench.run("guest_kill", "rollout", ROLLOUT)
    before = _mid_run(bench, run)
    victims = run.find(r"-m cua_guest(\s|$)")[:1]
    bench.log(f"[guest_kill] SIGKILL guest pid {victims}")
    _kill(victims)
    recover = wait_for_progress(run, bench.deadline_s, after=before)
    return figures(
        "guest_kill",
        [run],
        [run.wait(bench.deadline_s)],
        recover,
        extra_ok=bool(victims),
        detail="" if victims else "no guest found",
    )


def stop_and_resume(sig: signal.Signals) -> Fault:
    """Stop a training run mid-way with `sig`, then `--resume` it to the end."""
    name = "sigterm" if sig == signal.SIGTERM else "sigkill_resume"

    def fault(bench: FaultBench) -> dict[str, Any]:
        run = bench.run(name, "train", TRAIN)
        before = _mid_run(bench, run)
        bench.log(f"[{name}] {sig.name} the run (pid {run.pid}) after {before} trajectories")
        t0 = time.monotonic()
        run.signal(sig)
        first = run.wait(STOP_DEADLINE_S if sig == signal.SIGTERM else 10.0)
        stop_s = round(time.monotonic() - t0, 1)
        left = run.leftovers()
        detail = []
        if first is None:
            detail.append(f"did not stop within {STOP_DEADLINE_S:.0f} s of {sig.name}")
        if left["processes"] or left["desktops"]:
            detail.append(
                f"after {sig.name}: left {len(left['processes'])} processes, "
                f"desktops {left['desktops']}"
            )
        resumed = bench.resume(run)
        recover = wait_for_progress(resumed, bench.deadline_s, after=before)
        code = resumed.wait(bench.deadline_s)
        out = figures(
            name,
            [run, resumed],
            [first, code],
            stop_s if sig == signal.SIGTERM else recover,
            extra_ok=not detail,
            detail="; ".join(detail),
        )
        return out

    return fault


def proxied(mode: Mode) -> Fault:
    """A rollout whose policy is a real hf replica behind a proxy that answers the
    first chat request badly (`malformed`) or never (`hang`)."""
    name = "malformed_response" if mode == "malformed" else "hanging_server"

    def fault(bench: FaultBench) -> dict[str, Any]:
        from cua_rl.inference.launcher import default_tiny_dir

        tiny = bench.tiny_dir or default_tiny_dir()
        with model_server(tiny, bench.work_dir / f"{name}.server.log") as url:
            proxy = FaultProxy(url).start()
            try:
                proxy.arm(mode, 1)
                overrides = [
                    *ROLLOUT,
                    f"policy.urls=[{proxy.url}]",
                    "policy.requests.request_timeout_s=20",
                ]
                run = bench.run(name, "rollout", overrides)
                code = run.wait(bench.deadline_s)
                return figures(
                    name,
                    [run],
                    [code],
                    proxy.recover_s,
                    extra_ok=proxy.injected == 1,
                    detail="" if proxy.injected else "the fault was never served",
                )
            finally:
                proxy.stop()

    return fault


def disk_full(bench: FaultBench) -> dict[str, Any]:
    """A rollout whose run directory is a 3 MB tmpfs: it must end by itself with one
    line naming the full disk, no traceback, nothing left running."""
    mount = bench.work_dir / "disk_full.tmpfs"
    mount.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        return {
            "name": "disk_full",
            "survived": False,
            "trajectories_lost": 0,
            "updates_duplicated": 0,
            "episodes_aborted": 0,
            "recover_s": None,
            "why": f"cannot mount a tmpfs: {done.stderr.strip()}",
        }
    try:
        run = bench.run("disk_full", "rollout", ["fleet.max_groups=20"], run_dir=mount / "run")
        code = run.wait(bench.deadline_s)
        errors = run.error_lines()
        clean = (
            code not in (0, None) and len(errors) == 1 and "no space left on device" in errors[0]
        )
        out = figures(
            "disk_full",
            [run],
            [0 if clean else code],
            None,
            extra_ok=clean,
            detail="" if clean else f"errors: {errors[-3:]}",
            need_finished=False,
        )
        out["error"] = errors[0] if errors else None
        return out
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)
        shutil.rmtree(mount, ignore_errors=True)


def corrupt_screenshot(bench: FaultBench) -> dict[str, Any]:
    """Mid-rollout, each desktop's guest serves its next screenshot truncated (the
    guest's fault hook); recovery is timed from the injection to the next good
    trajectory stored."""
    run = bench.run("corrupt_screenshot", "rollout", ROLLOUT, env=FAULT_HOOKS_ENV)
    before = _mid_run(bench, run)
    t0 = time.monotonic()
    hit = run.corrupt_a_screenshot(bench.deadline_s)
    bench.log(f"[corrupt_screenshot] an episode got a truncated screenshot: {hit}")
    progressed = wait_for_progress(run, bench.deadline_s, after=before)
    recover = None if progressed is None else round(time.monotonic() - t0, 1)
    return figures(
        "corrupt_screenshot",
        [run],
        [run.wait(bench.deadline_s)],
        recover,
        extra_ok=hit,
        detail="" if hit else "no episode got a truncated screenshot",
    )


FAULTS: dict[str, Fault] = {
    "policy_replica_kill": replica_kill("policy", 1),
    "policy_replica_kill_2_replicas": replica_kill("policy", 2),
    "prm_replica_kill": replica_kill("prm", 1),
    "malformed_response": proxied("malformed"),
    "hanging_server": proxied("hang"),
    "corrupt_screenshot": corrupt_screenshot,
    "guest_kill": guest_kill,
    "sigkill_resume": stop_and_resume(signal.SIGKILL),
    "sigterm": stop_and_resume(signal.SIGTERM),
    "disk_full": disk_full,
}
"""Every fault class, in the order the bench runs them."""
