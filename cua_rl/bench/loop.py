"""`cua-rl bench loop` (cli/bench/loop.py): the real training loop, asynchronous and
synchronous, side by side.

Each mode is one `cua-rl train` run of the same preset, seed and update budget
(real local desktops, the model pools, both learners with weight sync,
adaptation on) with `metrics.spans` on; only `train.mode` differs (a third run,
`async_global_pause`, turns `train.sync.staggered` off). The figures come from
what each run stored: its spans (`report/loop_profile.py`) and its update events
and trajectories (`run_store`).

The measured window of a run starts with its first rollout and ends when its last
policy update has been synced: model-server start-up and the drain after the
budget are outside it. The simulator check: a latency model fitted to the async
run's own spans (`latency.json`, per-call durations only) feeds `bench fleet
--simulated` for this machine's fleet shape, and its predicted async/sync ratio is
printed beside the measured one.

The figures of each run, read back from its directory, are in loop_figures.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cua_rl.bench.loop_figures import measured_window, median_or_zero, mode_figures, update_windows
from cua_rl.config import RunConfig, load_config
from cua_rl.errors import RunFailed
from cua_rl.store.run_store import RunStore

MODES: dict[str, tuple[str, ...]] = {
    "async": ("train.mode=async",),
    "sync": ("train.mode=sync",),
    "async_global_pause": ("train.mode=async", "train.sync.staggered=false"),
    # issue 51's switches, each against `async` (the defaults: no spares, no forks,
    # screenshots by libjpeg-turbo from the capture buffer)
    "async_spares": ("train.mode=async", "fleet.spare_desktops=2"),
    "async_forks": ("train.mode=async", "fleet.fork_groups=true"),
    "async_pillow": ("train.mode=async", "episode.screenshot_encoder=pillow"),
}
"""Each mode's overrides on top of the shared ones."""
SWITCH_MODES = ("async_spares", "async_forks", "async_pillow")
"""Modes that turn one of issue 51's switches away from its default."""


def shared_overrides(
    engine: str, updates: int, seed: int, tiny_model_dir: Path | None, state_dir: Path | None
) -> list[str]:
    """What every mode's run shares: the engines, the budget, the seed, spans on."""
    out = [
        f"policy.engine={engine}",
        f"prm.engine={engine}",
        f"train.max_policy_updates={updates}",
        f"train.policy.seed={seed}",
        f"train.prm.seed={seed}",
        "metrics.spans=true",
        "metrics.live=false",
        "metrics.tensorboard=false",
        "fleet.max_groups=1000",
    ]
    if tiny_model_dir is not None:
        out.append(f"tiny_model_dir={tiny_model_dir}")
    if state_dir is not None:
        out.append(f"desktops.provider.state_dir={state_dir}")
    return out


def run_mode(preset: str, run_dir: Path, overrides: list[str], timeout_s: float) -> None:
    """One `cua-rl train` run; its output goes to stderr (stdout stays for --json)."""
    cmd = [
        sys.executable,
        "-m",
        "cua_rl.cli",
        "train",
        "--preset",
        preset,
        "--out",
        str(run_dir),
        *overrides,
    ]
    done = subprocess.run(cmd, stdout=sys.stderr, timeout=timeout_s, check=False)
    if done.returncode != 0:
        raise RunFailed(
            f"the {run_dir.name} run failed (exit {done.returncode}); its log: "
            f"{run_dir / 'logs' / 'run.log'}"
        )


def machine() -> dict[str, Any]:
    """What the figures depend on besides the code: cores and load."""
    return {"cores": os.cpu_count(), "load_1m": round(os.getloadavg()[0], 2)}


def order_agreement(result: dict[str, Any]) -> dict[str, Any]:
    """Per switch mode: whether its groups' task order equals the `async` run's (same
    seed), over the groups both opened, and the first place they part."""
    base = result["async"]["task_order"]
    out: dict[str, Any] = {}
    for mode in SWITCH_MODES:
        if mode not in result:
            continue
        order = result[mode]["task_order"]
        common = min(len(base), len(order))
        parted = next((k for k in range(common) if base[k] != order[k]), None)
        out[mode] = {"equal": parted is None, "groups_compared": common, "parted_at": parted}
    return out


def latency_file(run_dir: Path, cfg: RunConfig, out: Path) -> dict[str, Any]:
    """The simulator's latency model for this machine, from one run: per-call
    durations from its spans, the learners' update and sync from its update events,
    the fleet's shape from the config. Written to `out` (for `bench fleet --latency`)."""
    from cua_rl.report.loop_profile import latency_model, load_spans

    spans = load_spans(run_dir)
    model = latency_model(spans)
    # encoding and storing each screenshot (`images`) is per-step host work the
    # simulator has no field for: it goes with the screenshot
    images = [s["end"] - s["start"] for s in spans if s["kind"] == "images"]
    if images and "screenshot_s" in model:
        model["screenshot_s"]["median_s"] += median_or_zero(images)
    # The simulator trains every group it rolls out; a real run also rolls out
    # groups that train nothing (Algorithm 2's rejected candidates, empty groups).
    # Per group rolled out, the learners' time is what the run spent over all groups.
    updates = update_windows(run_dir)
    start, end = measured_window(run_dir)
    groups = len(
        {
            r["group_id"]
            for r in RunStore.read_only(run_dir).trajectory_records()
            if start <= r["started_at"] <= end
        }
    )
    trained = sum(u["trained"] - u["start"] for u in updates)
    model["learner_s_per_group"] = max(1e-3, trained / max(1, groups))
    synced = sum(u["end"] - u["trained"] for u in updates)
    batches = max(1.0, groups / cfg.train.tasks_per_update)
    model["weight_sync_s"] = {"median_s": max(1e-3, synced / batches), "sigma": 0.2}
    steps = model.setdefault("episode_steps", {})
    steps["max"] = cfg.episode.max_steps
    steps["min"] = min(int(steps.get("min", 1)), cfg.episode.max_steps)
    desktops = cfg.desktops.count
    model["batch_slowdown"] = 0.0  # measured under this run's own load already
    model["capacity"] = {
        "policy_batch": max(32, desktops),
        "prm_batch": max(32, desktops),
        "actors_per_policy_replica": desktops / cfg.policy.replicas,
        "actors_per_prm_replica": desktops / cfg.prm.replicas,
        "actors_per_learner_node": float(desktops),
    }
    out.write_text(json.dumps(model, indent=2))
    return model


def predictions(out: Path, cfg: RunConfig, seed: int, measured: float) -> dict[str, Any]:
    """The simulator's async/sync ratio for this machine, two ways:
    - `one_model`: one latency model, fitted to the async run (`latency.json`), for
      both modes, as `bench fleet --simulated` assumes (on a cluster, desktops,
      model servers and learners do not share processors);
    - `per_mode`: each mode simulated with the latencies measured in its own run
      (`latency-sync.json` for sync): here every part shares 2 cores, so calls and
      updates are slower while the other parts are busy, which the async mode is.
    Each with its ratio to the measured one."""
    one = simulate(latency_file(out / "async", cfg, out / "latency.json"), cfg, seed)
    own = simulate(latency_file(out / "sync", cfg, out / "latency-sync.json"), cfg, seed)
    result: dict[str, Any] = {}
    for name, (fast, slow) in {"one_model": (one, one), "per_mode": (one, own)}.items():
        ratio = fast["async_steps_per_s"] / slow["sync_streaming_steps_per_s"]
        result[name] = {
            "ratio": ratio,
            "vs_measured": ratio / measured,
            "async_steps_per_min": 60 * fast["async_steps_per_s"],
            "sync_steps_per_min": 60 * slow["sync_streaming_steps_per_s"],
            "host_bound": fast["host_bound"] or slow["host_bound"],
        }
    return result


SIM_SEEDS = 4
"""Simulated runs averaged per prediction: a fleet of a few desktops finishes only a
handful of episodes in the simulator's window, so one run's rate is noisy."""
SIM_TIME_SCALE = 0.1
"""A few desktops cost the event loop little: a fast clock keeps the predictions at
seconds of wall time (`host_bound` reports a loop that lagged)."""


def simulate(latency: dict[str, Any], cfg: RunConfig, seed: int) -> dict[str, Any]:
    """`bench fleet --simulated` on the latency model measured here: the mean rates
    of `SIM_SEEDS` runs from `seed` on."""
    from cua_rl.bench.fleet import bench
    from cua_rl.rollout.latency import LatencyModel

    model = LatencyModel.model_validate({**latency, "time_scale": SIM_TIME_SCALE})
    runs = [
        asyncio.run(
            bench(
                model,
                cfg.desktops.count,
                group_size=cfg.fleet.group_size,
                eta=cfg.fleet.eta,
                duration_s=60.0,
                seed=seed + k,
            )
        )
        for k in range(SIM_SEEDS)
    ]
    mean = {
        key: statistics.fmean(r[key] for r in runs)
        for key in ("async_steps_per_s", "sync_streaming_steps_per_s")
    }
    return {**mean, "host_bound": any(r["host_bound"] for r in runs)}


def run_loop_bench(
    preset: str,
    engine: str,
    updates: int,
    modes: list[str],
    out: Path,
    *,
    seed: int = 0,
    spares: int = 2,
    tiny_model_dir: Path | None = None,
    state_dir: Path | None = None,
    timeout_s: float = 3600.0,
    reuse: bool = False,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """One `train` run per mode of `modes` (keys of MODES, async among them) in
    OUT/<mode>, their figures (each with its episode breakdown and task order; the
    switch modes' orders compared with async's) and, with sync among them, the
    async/sync ratio and the simulator's predictions for this machine;
    all of it also written to OUT/loop.json. `reuse`: a mode whose run already
    finished in OUT is analysed again instead of run again."""
    cfg = load_config(RunConfig, preset=preset)
    shared = shared_overrides(engine, updates, seed, tiny_model_dir, state_dir)
    out.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {
        "machine_before": machine(),
        "preset": preset,
        "engine": engine,
        "spare_desktops": spares,
        "updates": updates,
        "desktops": cfg.desktops.count,
        "group_size": cfg.fleet.group_size,
        "tasks_per_update": cfg.train.tasks_per_update,
    }
    started = time.monotonic()
    for k, mode in enumerate(modes, 1):
        log(f"bench loop: {mode} ({k}/{len(modes)})")
        run_dir = out / mode
        if not (reuse and (run_dir / "run.sqlite").is_file() and update_windows(run_dir)):
            extra = [f"fleet.spare_desktops={spares}"] if mode == "async_spares" else []
            run_mode(preset, run_dir, [*shared, *MODES[mode], *extra], timeout_s)
        result[mode] = mode_figures(run_dir, cfg.desktops.count)
    result["task_order_vs_async"] = order_agreement(result)
    if "sync" in result:
        result["ratio"] = result["async"]["steps_per_min"] / result["sync"]["steps_per_min"]
        log("bench loop: the simulator on the measured latencies")
        result["simulated"] = predictions(out, cfg, seed, result["ratio"])
    result["machine_after"] = machine()
    result["wall_s"] = time.monotonic() - started
    (out / "loop.json").write_text(json.dumps(result, indent=2))
    return result


def summary_lines(result: dict[str, Any]) -> str:
    """The headline figures as text (the whole result is in OUT/loop.json)."""
    lines = []
    for mode in MODES:
        if mode in result:
            fig = result[mode]
            lines.append(
                f"{mode:>20}: {fig['steps_per_min']:.1f} steps/min, "
                f"{fig['episodes_per_min']:.1f} episodes/min, desktops busy "
                f"{fig['desktop_busy']:.0%}, setup wait {fig['setup_wait_share']:.0%} "
                f"of episode time, window {fig['window']['wall_s']:.0f} s"
            )
    for mode, agreement in result.get("task_order_vs_async", {}).items():
        lines.append(
            f"{mode:>20}: task order {'equals' if agreement['equal'] else 'differs from'}"
            f" async's over {agreement['groups_compared']} groups"
        )
    if "simulated" not in result:
        return "\n".join(lines)
    sim = result["simulated"]
    lines.append(
        f"async/sync measured {result['ratio']:.2f}x; simulated with the async "
        f"run's latencies {sim['one_model']['ratio']:.2f}x, with each mode's own "
        f"{sim['per_mode']['ratio']:.2f}x"
    )
    return "\n".join(lines)
