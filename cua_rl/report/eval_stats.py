"""The uncertainty of an evaluation report: an interval for every rate, and pass@k
and pass^k for k up to the runs per task (`cua_rl.report.stats` computes them).

Each scope (the task set, an OSWorld group, a domain) has two rates, as
`eval_report` counts them: over its scored tasks, and over all its tasks, where a
task without a score (not run, setup failed, unsupported) counts as 0, which is
the figure comparable with OSWorld's. Each gets its denominator and a 95 %
interval from the nested bootstrap (tasks resampled, each task's runs resampled
within it), seeded, so the report is the same when written again.

pass@k and pass^k (expected best and worst score of k of a task's runs) are
averaged over the tasks with at least k scored runs (`scored`), and over all
tasks with every other task counted as 0 (`all`). pass@1 is the rate itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cua_rl.report.stats import (
    LEVEL,
    RESAMPLES,
    SEED,
    nested_bootstrap_interval,
    pass_at_k,
    pass_hat_k,
)

INTERVAL_METHOD = (
    f"nested percentile bootstrap: tasks resampled, then each task's runs "
    f"within it; {RESAMPLES} resamples, seed {SEED}"
)


def statistics_note() -> dict[str, Any]:
    """What every interval of the report is (written once, at the report's top)."""
    return {
        "interval": INTERVAL_METHOD,
        "level": LEVEL,
        "resamples": RESAMPLES,
        "seed": SEED,
        "pass_k": "expected best (pass@k) and worst (pass^k) score of k runs of a task "
        "drawn without replacement; for 0/1 scores the unbiased estimators",
    }


def scope_intervals(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """`interval_scored` and `interval_all` of a scope's task rows (each row's
    `scores` are its scored runs; a row without one counts as [0.0] over all)."""
    scored = [list(row["scores"]) for row in rows if row["scores"]]
    every = [list(row["scores"]) or [0.0] for row in rows]
    return {
        "interval_scored": nested_bootstrap_interval(scored).as_dict(),
        "interval_all": nested_bootstrap_interval(every).as_dict(),
    }


def pass_k_table(rows: Sequence[Mapping[str, Any]], runs: int | None) -> dict[str, Any]:
    """{k: {"pass_at_k": {...}, "pass_hat_k": {...}}} for k = 1..runs (None: the
    most runs any task has), each with `scored`, its task count `tasks`, and `all`."""
    longest = max((len(row["scores"]) for row in rows), default=0)
    top = runs if runs is not None else longest
    table: dict[str, Any] = {}
    for k in range(1, top + 1):
        entry: dict[str, Any] = {}
        for name, fn in (("pass_at_k", pass_at_k), ("pass_hat_k", pass_hat_k)):
            values = [fn(row["scores"], k) for row in rows if len(row["scores"]) >= k]
            entry[name] = {
                "scored": sum(values) / len(values) if values else None,
                "tasks": len(values),
                "all": sum(values) / len(rows) if rows else None,
            }
        table[str(k)] = entry
    return table
