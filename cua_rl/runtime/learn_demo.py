"""The learning demo: does the whole loop turn experience into a better agent?

A demo run is three phases in one run directory:
1. `eval_initial/`: the starting variant (the first task's original) played
   `demo.eval_rollouts` times by the initial policy, nothing trained, no judge;
2. the training run itself (RUN_DIR: actors, streaming PRM, both learners, weight
   sync, the template selector), unchanged;
3. `eval_final/`: the same pass with the final policy, served from the last weight
   export, at the same temperature as pass 1.
Then `learn_demo.json` and three PNGs are written from the three stores. Each
pass is its own run store, so `cua-rl runs show` and the viewer show it too.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path
from typing import Any

from cua_rl.config import RunConfig
from cua_rl.errors import ConfigError
from cua_rl.rollout.fleet import Fleet
from cua_rl.rollout.scheduler import GroupScheduler
from cua_rl.runtime.local import load_run_tasks, local_components, task_cycle
from cua_rl.types import TaskVariant

log = logging.getLogger(__name__)

RESULT_FILE = "learn_demo.json"


def check_demo_config(cfg: RunConfig) -> None:
    """The demo serves the final policy from the learner's last weight export."""
    if cfg.train.sync.mode != "checkpoint":
        raise ConfigError(
            "demo.eval_rollouts > 0 needs train.sync.mode=checkpoint "
            "(the final evaluation pass serves the last weight export)"
        )
    if cfg.runtime != "local":
        raise ConfigError("demo.eval_rollouts > 0 runs on one machine: set runtime=local")


def pass_success(pass_dir: Path) -> tuple[int, int]:
    """(successes, scored rollouts) stored in an evaluation pass's run store."""
    from cua_rl.viewer.queries import open_readonly

    conn = open_readonly(pass_dir)
    try:
        row = conn.execute(
            "SELECT SUM(outcome = 1), COUNT(*) FROM trajectories "
            "WHERE status != 'aborted' AND outcome IS NOT NULL"
        ).fetchone()
    finally:
        conn.close()
    return int(row[0] or 0), int(row[1])


async def evaluation_pass(
    cfg: RunConfig, pass_dir: Path, variant: TaskVariant, policy_model: str | None = None
) -> dict[str, Any]:
    """Play `variant` demo.eval_rollouts times (one-rollout groups, no judge) with
    the policy at `policy_model` (None: cfg.policy.model) and score every rollout."""
    pass_cfg = cfg.model_copy(deep=True)
    pass_cfg.judge.enabled = False
    if cfg.demo.eval_temperature is not None:
        pass_cfg.episode.temperature = cfg.demo.eval_temperature
    if policy_model is not None:
        pass_cfg.policy.model = policy_model
    rollouts = cfg.demo.eval_rollouts
    pass_dir.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 - once per pass
    async with local_components(pass_cfg, pass_dir) as parts:
        scheduler = GroupScheduler(task_cycle([variant], rollouts), 1, max_groups=rollouts)
        fleet = Fleet(
            scheduler,
            parts.desktops,
            parts.policy,
            parts.store,
            pass_cfg.episode,
            pass_cfg.fleet,
            seed=pass_cfg.seed,
        )
        counts = await fleet.run()
    wins, scored = await asyncio.to_thread(pass_success, pass_dir)
    return {
        "success": wins / scored if scored else None,
        "successes": wins,
        "scored": scored,
        "aborted": int(counts.get("aborted", 0)),
        "temperature": pass_cfg.episode.temperature,
        "wall_s": round(float(counts.get("wall_s", 0.0)), 1),
    }


def final_export(run_dir: Path) -> Path:
    """The policy learner's last weight export (checkpoint-mode weight sync)."""
    exports = sorted((run_dir / "exports" / "policy").glob("v*"))
    if not exports:
        raise FileNotFoundError(
            f"{run_dir}/exports/policy: no weight export; did the policy learner make an update?"
        )
    return exports[-1]


async def run_learn_demo(cfg: RunConfig, run_dir: Path) -> dict[str, Any]:
    """Pass 1, the training run, pass 2, then learn_demo.json and the PNGs."""
    from cua_rl.runtime.train import run_training

    check_demo_config(cfg)
    t0 = time.monotonic()
    start = load_run_tasks(cfg)[0][0]
    first = await evaluation_pass(cfg, run_dir / "eval_initial", start)
    log.info("learn demo: initial policy succeeds %s of %s", first["successes"], first["scored"])
    summary = await run_training(cfg, run_dir)
    export = final_export(run_dir)
    last = await evaluation_pass(cfg, run_dir / "eval_final", start, str(export))
    result = await asyncio.to_thread(
        write_demo_result,
        cfg,
        run_dir,
        start,
        first,
        last,
        {**summary, "demo_wall_s": time.monotonic() - t0},
    )
    return {**summary, **{k: result[k] for k in DEMO_KEYS}}


DEMO_KEYS = (
    "success_first",
    "success_last",
    "prm_agreement_first",
    "prm_agreement_last",
    "harder_variants_served",
)


def write_demo_result(
    cfg: RunConfig,
    run_dir: Path,
    start: TaskVariant,
    first: dict[str, Any],
    last: dict[str, Any],
    summary: dict[str, Any],
) -> dict[str, Any]:
    """learn_demo.json and the three PNGs (matplotlib is imported only here)."""
    from cua_rl.adapt.rewriter import load_difficulty
    from cua_rl.report.learn_demo_curves import plot_demo, read_demo_series
    from cua_rl.tasks.sources import difficulty_file

    path = cfg.adapt.difficulty or difficulty_file(cfg.tasks.source, cfg.tasks.templates_root)
    entry = load_difficulty(path).get(start.task_id) or []
    order = list(entry["order"] if isinstance(entry, dict) else entry) or [start.evaluator_name]
    series = read_demo_series(run_dir, order)
    start_index = order.index(start.evaluator_name) if start.evaluator_name in order else 0
    harder = series.harder_served(start_index)
    plots = plot_demo(
        series,
        order,
        run_dir,
        eval_first=first["success"],
        eval_last=last["success"],
        last_version=summary.get("policy_version"),
    )
    result = {
        "task_id": start.task_id,
        "start_variant": start.evaluator_name,
        "success_first": first["success"],
        "success_last": last["success"],
        "prm_agreement_first": series.agreement("first"),
        "prm_agreement_last": series.agreement("last"),
        "harder_variants_served": len(harder),
        "harder_variants": harder,
        "adapt_decisions": series.decisions,
        "eval_initial": first,
        "eval_final": last,
        "success_by_policy_version": {
            str(v): w / n for v, (w, n) in series.success_by_version.items()
        },
        "prm_agreement_by_version": {
            str(v): a / n for v, (a, n) in series.agreement_by_version.items()
        },
        "policy_version": summary.get("policy_version"),
        "prm_version": summary.get("prm_version"),
        "wall_s": round(float(summary.get("demo_wall_s", 0.0)), 1),
        "plots": {k: p.name for k, p in plots.items()},
    }
    (run_dir / RESULT_FILE).write_text(json.dumps(result, indent=2) + "\n")
    return result
