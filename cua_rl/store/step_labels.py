"""Step labels stored with a run's trajectories: who said which steps were good.

A labeller (a stronger model's majority vote, a person, a task family that knows
its golden path) records its labels of one trajectory as one `events` row of
kind `step_labels` (docs/run-store.md): subject = the trajectory id, data =
`{"labels": [1, -1, null, ...], "source": "<who labelled>"}`, the list indexed
by step index, null for a step it did not label. Events need no migration, so
any store of schema 1 takes them. A later row for the same trajectory replaces
an earlier one (a relabel). `cua-rl eval-prm` reads them as the targets of
process accuracy (docs/reward-model-accuracy.md).

`write_step_labels` is the one writer, so every labeller writes the same shape;
`read_step_labels` validates every row it reads and sets aside a malformed one
with a line naming it, so one bad row costs that trajectory's labels only.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cua_rl.store.run_store import DB_NAME, RunStore
from cua_rl.store.schema import STEP_LABELS

MAX_SOURCE_CHARS = 200


@dataclass(frozen=True, slots=True)
class StoredLabels:
    """One trajectory's labels: `labels[i]` is step i's (+1, -1 or None)."""

    labels: tuple[int | None, ...]
    source: str


@dataclass
class LabelsRead:
    """Every trajectory's latest valid labels, and the rows that were not valid."""

    by_trajectory: dict[str, StoredLabels] = field(default_factory=dict)
    rejected: list[str] = field(default_factory=list)
    """One line per malformed row: where it is and what was expected."""


def label_problem(labels: Any, source: Any) -> str | None:
    """What is wrong with a labels list and its source, or None when they are valid."""
    if not isinstance(labels, list | tuple):
        return f'"labels" must be a list of 1, -1 or null, got {type(labels).__name__}'
    for i, value in enumerate(labels):
        if value is not None and (isinstance(value, bool) or value not in (1, -1)):
            return f'"labels"[{i}] must be 1, -1 or null, got {value!r}'
    if not isinstance(source, str) or not source.strip() or len(source) > MAX_SOURCE_CHARS:
        return (
            f'"source" must be a non-empty string of at most {MAX_SOURCE_CHARS} '
            f"characters, got {str(source)[:60]!r}"
        )
    return None


def write_step_labels(
    store: RunStore, trajectory_id: str, labels: Sequence[int | None], source: str
) -> None:
    """Record `labels` (indexed by step index; None: not labelled) of `trajectory_id`
    as labelled by `source`. Raises ValueError for labels other than 1, -1, None."""
    problem = label_problem(list(labels), source)
    if problem is not None:
        raise ValueError(f"step labels of {trajectory_id}: {problem}")
    store.add_event(STEP_LABELS, trajectory_id, {"labels": list(labels), "source": source})


def read_step_labels(store: RunStore) -> LabelsRead:
    """The stored labels of every trajectory (the latest valid row of each)."""
    where = store.run_dir / DB_NAME
    rows = store.query(
        lambda db: db.execute(
            "SELECT id, subject, data_json FROM events WHERE kind = ? ORDER BY id", (STEP_LABELS,)
        ).fetchall()
    )
    out = LabelsRead()
    for row_id, subject, data_json in rows:
        what = f"{where}: events row {row_id} ({STEP_LABELS} of {subject!r})"
        try:
            data = json.loads(data_json)
        except json.JSONDecodeError as exc:
            out.rejected.append(f"{what}: data_json is not JSON ({exc})")
            continue
        if not isinstance(data, dict):
            out.rejected.append(f"{what}: expected a JSON object, got {type(data).__name__}")
            continue
        problem = label_problem(data.get("labels"), data.get("source"))
        if problem is not None:
            out.rejected.append(f"{what}: {problem}")
            continue
        out.by_trajectory[subject] = StoredLabels(tuple(data["labels"]), data["source"])
    return out
