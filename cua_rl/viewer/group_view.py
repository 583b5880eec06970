"""A task group's rollouts side by side: every member of one group (the G rollouts
of one task variant that the learner standardizes together) with the screenshot
of each of its steps, so the columns can be read across, step by step.

Only screenshot names and summaries are returned (no responses, votes or
tokens): the page shows thumbnails and links each one to the full trajectory.
Both the member count and the steps per member are capped, like every list the
viewer serves.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from typing import Any

from cua_rl.viewer.queries import TASK_EXPR, TRAJ_COLUMNS, TRAJ_FROM, TRAJ_KEYS

MAX_MEMBERS = 16
"""Columns shown (groups are G = 8 by default)."""
MAX_STEPS = 100
"""Rows shown per column (episodes are capped below this by default)."""


def group_rollouts(conn: sqlite3.Connection, group_id: str) -> dict[str, Any] | None:
    """The members of `group_id`, oldest first, each with its step screenshots;
    None when the group has no trajectory in this store (or the id is empty)."""
    if not group_id:
        return None
    rows = conn.execute(
        f"SELECT {', '.join(TRAJ_COLUMNS)}, {TASK_EXPR} {TRAJ_FROM} WHERE t.group_id = ? "
        "ORDER BY t.started_at, t.trajectory_id LIMIT ?",
        (group_id, MAX_MEMBERS + 1),
    ).fetchall()
    if not rows:
        return None
    members = [dict(zip(TRAJ_KEYS, r, strict=True)) for r in rows[:MAX_MEMBERS]]
    ids = [m["trajectory_id"] for m in members]
    shots: dict[str, list[dict[str, Any]]] = defaultdict(list)
    marks = ", ".join("?" * len(ids))
    for tid, idx, before, after in conn.execute(
        "SELECT trajectory_id, step_index, screenshot_before, screenshot_after FROM steps "
        f"WHERE trajectory_id IN ({marks}) AND step_index < ? "
        "ORDER BY trajectory_id, step_index",
        (*ids, MAX_STEPS),
    ):
        shots[tid].append({"index": idx, "screenshot_before": before, "screenshot_after": after})
    for m in members:
        m["steps"] = shots.get(m["trajectory_id"], [])
    instruction = conn.execute(
        "SELECT instruction FROM variants WHERE variant_id = ?", (members[0]["variant_id"],)
    ).fetchone()
    return {
        "group_id": group_id,
        "task_id": members[0]["task_id"],
        "instruction": instruction[0] if instruction else None,
        "members": members,
        "members_truncated": len(rows) > MAX_MEMBERS,
        "max_steps": MAX_STEPS,
    }
