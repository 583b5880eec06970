"""`cua-rl bench soak` (cli/bench/soak.py): one training run for M minutes under a stream of faults,
watched from outside: throughput per window, memory, fds, threads and disk over
time, what was lost or done twice, and what was left running.

The run is `cua-rl train --preset quickstart` (local desktops, the two model
pools, both learners with weight sync, adaptation on) with budgets too large to
end by themselves (`train.max_policy_updates`, `fleet.max_groups`), in its own
session and desktop state dir (`faults.watched_run.RunProcess`, as `bench faults` starts
its runs). A sampler thread (`soak.sampler`) writes `OUT/samples.jsonl`; the
chaos schedule (`soak.chaos`) injects faults at the given rate (the guest's fault
hooks are armed for the corrupt screenshots: `CUA_GUEST_FAULT_HOOKS=1`); after M minutes
the run gets SIGTERM and must exit by itself within `--stop-deadline`. Then the
figures (`soak.report`, definitions in docs/soak.md) go to `OUT/soak.json` and
stdout, the picture to `OUT/soak.png`. `--runtime ray`: the same soak on a
multi-node Ray cluster with fleet nodes killed (`soak.ray_nodes`).
"""

from __future__ import annotations

import json
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cua_rl.bench.soak.hostile import limit_overrides

BIG = 1_000_000
"""Budgets no soak reaches: the run only ends when it is stopped."""
TICK_S = 2.0
"""How often the driver checks the store and the chaos schedule."""
PROGRESS_EVERY_S = 30.0


def soak_overrides(engine: str, seed: int) -> list[str]:
    """The run's overrides on the quickstart preset (see the module docstring)."""
    return [
        f"policy.engine={engine}",
        f"prm.engine={engine}",
        f"train.max_policy_updates={BIG}",
        f"fleet.max_groups={BIG}",
        f"train.policy.seed={seed}",
        f"train.prm.seed={seed}",
        "metrics.spans=true",
        *limit_overrides(),
    ]


def quiet_end_s(duration_s: float) -> float:
    """No fault is injected this close to the stop, so the last ones can recover."""
    return min(120.0, 0.25 * duration_s)


@dataclass
class SoakSpec:
    minutes: float
    chaos: float
    seed: int
    out: Path
    engine: str = "vllm"
    window_min: float = 5.0
    interval_s: float = 5.0
    stop_deadline_s: float = 60.0
    tiny_model_dir: Path | None = None
    kinds: list[str] | None = None
    extra: tuple[str, ...] = ()
    make_chaos: Any = None
    """Builds the fault schedule like `soak.chaos.Chaos` (None: that class); the Ray
    soak's node kills (`soak.ray_nodes.NodeChaos`)."""


def run_soak(spec: SoakSpec, log: Any = print) -> dict[str, Any]:
    """Run the soak of `spec` and return its figures (also written to OUT/soak.json)."""
    from cua_rl.bench.faults.cases import FaultBench
    from cua_rl.bench.faults.proxy import FaultProxy
    from cua_rl.bench.faults.watched_run import FAULT_HOOKS_ENV, RunProcess
    from cua_rl.bench.soak.chaos import Chaos
    from cua_rl.bench.soak.injections import store_progress
    from cua_rl.bench.soak.malformed import MALFORMED, MalformedAnswers
    from cua_rl.bench.soak.sampler import Sampler, load_samples
    from cua_rl.config import RunConfig, load_config
    from cua_rl.inference.client import PROXY_ENV

    spec.out.mkdir(parents=True, exist_ok=True)
    samples_path = spec.out / "samples.jsonl"
    samples_path.write_text("")
    group_size = load_config(RunConfig, preset="quickstart").fleet.group_size
    bench = FaultBench(
        spec.out, deadline_s=spec.stop_deadline_s, log=log, tiny_dir=spec.tiny_model_dir
    )
    # The malformed answers' proxy sits between the run's model clients and its
    # replicas from the start (soak.malformed), when that kind may be drawn.
    proxy = (
        FaultProxy().start()
        if spec.make_chaos is None and (spec.kinds is None or MALFORMED in spec.kinds)
        else None
    )
    env = {**FAULT_HOOKS_ENV, **({PROXY_ENV: proxy.url} if proxy else {})}
    first = bench.run(
        "run", "train", [*soak_overrides(spec.engine, spec.seed), *spec.extra], env=env
    )
    t0 = time.time()
    sampler = Sampler(first.pid, first.run_dir, samples_path, interval_s=spec.interval_s, t0=t0)
    sampler.start()
    earlier: list[RunProcess] = []
    """Invocations stopped by a `sigterm_resume` (what they started counts too)."""
    stops: list[float] = []

    def restart(t: float) -> tuple[RunProcess, dict[str, Any]]:
        """SIGTERM the run, wait for it and what it started, `--resume` it."""
        old = chaos.run
        stops.append(time.time())
        old.signal(signal.SIGTERM)
        code = old.wait(spec.stop_deadline_s)
        stop_s = round(time.time() - stops[-1], 1)
        earlier.append(old)
        for pid, (cmd, started) in sampler.seen.items():
            old.remember(pid, cmd, started)
        old.seen.pop(old.pid, None)
        left = old.leftovers()
        log("soak: resuming the run")
        new = RunProcess(old.kind, old.run_dir, old.state_dir, resume=True, env=old.env).start()
        sampler.root_pid = new.pid
        return new, {"exit": code, "stop_s": stop_s, "left": len(left["processes"])}

    extra = {"malformed": MalformedAnswers(proxy)} if proxy else {}
    chaos = (spec.make_chaos or Chaos)(
        first, spec.chaos, spec.seed, spec.kinds, log=log, restart=restart, **extra
    )
    duration_s = spec.minutes * 60.0
    quiet_s = quiet_end_s(duration_s)
    last_progress = 0.0
    try:
        while (t := time.time() - t0) < duration_s and chaos.run.proc.poll() is None:  # type: ignore[union-attr]  # the run was started, so proc is set
            good, newest = store_progress(first.run_dir)
            progress = None if newest is None else newest - t0
            chaos.tick(t, progress, inject=good > 0 and t < duration_s - quiet_s)
            if t - last_progress >= PROGRESS_EVERY_S:
                last_progress = t
                log(
                    f"soak: {t / 60:.1f}/{spec.minutes} min, {good} good trajectories, "
                    f"{len(chaos.injections)} faults, {sampler.samples} samples"
                )
            time.sleep(TICK_S)
        run = chaos.run
        stopped_at = time.time()
        ended_early = run.proc.poll() is not None  # type: ignore[union-attr]  # the run was started, so proc is set
        newest = store_progress(run.run_dir)[1]
        chaos.finish(stopped_at - t0, None if newest is None else newest - t0)
        stop_s = None
        if ended_early:
            code = run.proc.returncode  # type: ignore[union-attr]  # the run was started, so proc is set
            log(
                f"soak: the run ended by itself after {(stopped_at - t0) / 60:.1f} min "
                f"(exit {code})"
            )
        else:
            log("soak: SIGTERM to the run")
            run.signal(signal.SIGTERM)
            code = run.wait(spec.stop_deadline_s)
            stop_s = round(time.time() - stopped_at, 1)
    finally:
        sampler.stop()
        if chaos.run.proc is not None and chaos.run.proc.poll() is None:
            chaos.run.kill_tree()
        if proxy is not None:
            proxy.stop()
    for other in earlier:
        for pid, cmd in other.seen.items():
            run.remember(pid, cmd, other.seen_started[pid])
    for pid, (cmd, started) in sampler.seen.items():
        run.remember(pid, cmd, started)
    run.seen.pop(run.pid, None)  # the run itself is reaped by wait(); not a leftover
    left = run.leftovers()
    samples = load_samples(samples_path)
    from cua_rl.bench.soak.report import soak_figures

    figures = soak_figures(
        run_dir=run.run_dir,
        samples=samples,
        t0=t0,
        stopped_at=stopped_at,
        window_s=spec.window_min * 60.0,
        faults=chaos.results(),
        group_size=group_size,
        left=left,
        stops=stops,
    )
    result = {
        "minutes": spec.minutes,
        "chaos": spec.chaos,
        "seed": spec.seed,
        "engine": spec.engine,
        "window_min": spec.window_min,
        "t0": t0,
        "run_exit": code,
        "stop_s": stop_s,
        "ended_before_stop": ended_early,
        "run_errors": run.error_lines()[-5:],
        "faults_skipped": chaos.skipped,
        **({"fault_proxy": extra["malformed"].figures()} if proxy else {}),
        **figures,
        "out": str(spec.out),
        "run_dir": str(run.run_dir),
        "samples_file": str(samples_path),
    }
    (spec.out / "soak.json").write_text(json.dumps(result, indent=2, default=str))
    try:
        result["png"] = str(_plot(spec.out, samples, result, t0))
    except Exception as exc:  # noqa: BLE001 - a failed picture must not lose the figures
        log(f"soak: the PNG could not be drawn: {exc}")
        result["png"] = None
    return result


def _plot(out: Path, samples: list[dict[str, Any]], result: dict[str, Any], t0: float) -> Path:
    from cua_rl.bench.soak.plot import plot_soak
    from cua_rl.store.run_store import RunStore

    store = RunStore.read_only(Path(result["run_dir"]))
    try:
        records = store.trajectory_records()
    finally:
        store.close()
    return plot_soak(out / "soak.png", samples, records, result, t0)
