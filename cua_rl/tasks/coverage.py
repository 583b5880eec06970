"""Evaluator coverage: how many tasks have every getter, metric and setup step
they use implemented, per domain. This is what decides whether scores on a task
set are comparable with published OSWorld numbers."""

from __future__ import annotations

from collections import Counter
from typing import Any

from cua_rl.tasks.sources import load_source


def coverage(source: str, split: str | None = None) -> dict[str, Any]:
    """`total`, `resolved`, `per_domain` {domain: {total, resolved}}, `missing`
    {name: number of tasks using it}."""
    load = load_source(source, split)
    per_domain: dict[str, dict[str, int]] = {}
    missing: Counter[str] = Counter()
    for task in load.tasks:
        row = per_domain.setdefault(task.domain, {"total": 0, "resolved": 0})
        row["total"] += 1
        names = load.unimplemented.get(task.task_id, [])
        if names:
            missing.update(set(names))
        else:
            row["resolved"] += 1
    return {
        "total": len(load.tasks),
        "resolved": sum(r["resolved"] for r in per_domain.values()),
        "per_domain": dict(sorted(per_domain.items())),
        "missing": dict(missing.most_common()),
        "malformed": len(load.problems),
    }
