"""Read-only, paged queries over a run store (`run.sqlite`) for the viewer and the
learning-curve plots.

The connection is opened with `mode=ro`, so a viewer can never block, lock or
alter a run that is being written: in WAL mode a reader sees the last committed
snapshot while writers carry on. Every list returned for the JSON API is
bounded: `clamp_limit` caps page sizes, trajectories page by keyset (newest
first, cursor = `finished_at` + id of the last row seen), which stays as fast
on page 200 as on page 1, and the short lists (tasks, history) by offset.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cua_rl.reward.config import RewardConfig, stored_reward
from cua_rl.store.read_only import connect_read_only
from cua_rl.store.run_store import DB_NAME

MAX_PAGE = 200
"""Upper bound of any page the API returns, whatever the client asks for."""

TASK_EXPR = (
    "COALESCE(v.task_id, CASE WHEN instr(t.variant_id, ':') > 0 "
    "THEN substr(t.variant_id, 1, instr(t.variant_id, ':') - 1) ELSE t.variant_id END)"
)
"""A trajectory's task id: from its variant row, or (for runs that never stored
the variant) the part of `task:evaluator` variant ids before the colon."""

TRAJ_FROM = "FROM trajectories t LEFT JOIN variants v ON v.variant_id = t.variant_id"

TRAJ_COLUMNS = (
    "t.trajectory_id",
    "t.run_id",
    "t.variant_id",
    "t.group_id",
    "t.status",
    "t.score",
    "t.outcome",
    "t.policy_version_at_start",
    "t.n_steps",
    "t.screen_w",
    "t.screen_h",
    "t.error",
    "t.started_at",
    "t.finished_at",
)
TRAJ_KEYS = tuple(c.removeprefix("t.") for c in TRAJ_COLUMNS) + ("task_id",)


def open_readonly(run_dir: str | Path) -> sqlite3.Connection:
    """A read-only connection to the run store of `run_dir`: it never creates the
    store, nor leaves a file beside it (`store.read_only`)."""
    path = Path(run_dir).resolve() / DB_NAME
    if not path.is_file():
        raise FileNotFoundError(f"no run store at {path} (expected a run directory)")
    return connect_read_only(path, timeout=10.0, check_same_thread=False)


def clamp_limit(limit: int | None, default: int = 50) -> int:
    if limit is None:
        return default
    return max(1, min(int(limit), MAX_PAGE))


def _one(conn: sqlite3.Connection, sql: str, args: tuple[Any, ...] = ()) -> Any:
    return conn.execute(sql, args).fetchone()[0]


# run level -------------------------------------------------------------------


def overview(conn: sqlite3.Connection) -> dict[str, Any]:
    """Runs in the store with their counts and success rates, and the counters."""
    runs = []
    for run_id, created_at, n, wins, aborted, steps in conn.execute(
        "SELECT r.run_id, r.created_at, "
        "(SELECT COUNT(*) FROM trajectories t WHERE t.run_id = r.run_id "
        " AND t.status NOT IN ('aborted', 'setup_failed')), "
        "(SELECT COUNT(*) FROM trajectories t WHERE t.run_id = r.run_id "
        " AND t.status NOT IN ('aborted', 'setup_failed') AND t.outcome = 1), "
        "(SELECT COUNT(*) FROM trajectories t WHERE t.run_id = r.run_id "
        " AND t.status IN ('aborted', 'setup_failed')), "
        "(SELECT COALESCE(SUM(n_steps), 0) FROM trajectories t WHERE t.run_id = r.run_id) "
        f"FROM runs r ORDER BY r.created_at LIMIT {MAX_PAGE}"
    ):
        runs.append(
            {
                "run_id": run_id,
                "created_at": created_at,
                "trajectories": n,
                "success_rate": wins / n if n else None,
                "aborted": aborted,
                "steps": steps,
            }
        )
    counters = {
        f"{run_id}/{name}" if len(runs) > 1 else name: value
        for run_id, name, value in conn.execute(
            f"SELECT run_id, name, value FROM counters ORDER BY name LIMIT {MAX_PAGE}"
        )
    }
    versions = [
        r[0]
        for r in conn.execute(
            f"SELECT DISTINCT policy_version_at_start FROM trajectories ORDER BY 1 LIMIT {MAX_PAGE}"
        )
    ]
    return {
        "runs": runs,
        "counters": counters,
        "policy_versions": versions,
        "trajectories_total": _one(conn, "SELECT COUNT(*) FROM trajectories"),
    }


def run_reward(conn: sqlite3.Connection) -> RewardConfig:
    """The outcome weight and lambdas the run's rewards were made with, from its saved
    config (`train.reward`, or the old `train.lam` as both lambdas; the defaults if the
    run saved none or an unreadable one), so the viewer shows the rewards the learner
    used (`R_i = w * O + lambda * mean_j S_ij`, docs/algorithms.md)."""
    row = conn.execute("SELECT config_json FROM runs ORDER BY created_at LIMIT 1").fetchone()
    try:
        return stored_reward(json.loads(row[0])) if row else RewardConfig()
    except (TypeError, ValueError):  # ValidationError is a ValueError
        return RewardConfig()


# tasks -----------------------------------------------------------------------


def tasks_page(
    conn: sqlite3.Connection, offset: int = 0, limit: int | None = None, search: str = ""
) -> dict:
    """Tasks (those with variants or trajectories), with their domain, the
    instruction of their first variant and success rates over trajectories that
    were not aborted. `search` keeps the tasks whose id, domain or any variant's
    instruction contains it (case-insensitive), so a task can be found by what it
    asks and not only by its UUID."""
    limit = clamp_limit(limit)
    body = (
        f"SELECT {TASK_EXPR} AS task_id, t.status NOT IN ('aborted', 'setup_failed') AS n, "
        "(t.status NOT IN ('aborted', 'setup_failed') AND t.outcome = 1) AS win, "
        "t.status IN ('aborted', 'setup_failed') AS ab, "
        f"v.domain AS domain {TRAJ_FROM} "
        "UNION ALL SELECT task_id, 0, 0, 0, domain FROM variants"
    )
    having, args = "", ()
    needle = search.strip().lower()
    if needle:
        having = (
            "HAVING instr(lower(task_id), ?) > 0 OR instr(lower(COALESCE(MAX(domain), '')), ?) > 0"
            " OR EXISTS (SELECT 1 FROM variants w WHERE w.task_id = x.task_id"
            " AND instr(lower(w.instruction), ?) > 0)"
        )
        args = (needle, needle, needle)
    grouped = (
        f"SELECT task_id, MAX(domain) AS domain, SUM(n) AS n, SUM(win) AS win, SUM(ab) AS ab "
        f"FROM ({body}) x GROUP BY task_id {having}"
    )
    total = _one(conn, f"SELECT COUNT(*) FROM ({grouped})", args)
    rows = conn.execute(
        f"SELECT g.task_id, g.domain, g.n, g.win, g.ab, (SELECT w.instruction FROM variants w "
        "WHERE w.task_id = g.task_id ORDER BY w.created_at LIMIT 1) "
        f"FROM ({grouped}) g ORDER BY g.task_id LIMIT ? OFFSET ?",
        (*args, limit, max(0, offset)),
    ).fetchall()
    items = [
        {
            "task_id": tid,
            "domain": dom or "",
            "instruction": ins or "",
            "trajectories": n,
            "successes": w,
            "success_rate": w / n if n else None,
            "aborted": ab,
        }
        for tid, dom, n, w, ab, ins in rows
    ]
    return {
        "items": items,
        "total": total,
        "offset": max(0, offset),
        "limit": limit,
        "search": search,
    }


def task_variants(conn: sqlite3.Connection, task_id: str) -> list[dict[str, Any]]:
    """A task's variants, oldest first, each with its own success rate."""
    rows = conn.execute(
        "SELECT v.variant_id, v.evaluator_name, v.instruction, v.created_at, "
        "(SELECT COUNT(*) FROM trajectories t WHERE t.variant_id = v.variant_id "
        " AND t.status NOT IN ('aborted', 'setup_failed')), "
        "(SELECT COUNT(*) FROM trajectories t WHERE t.variant_id = v.variant_id "
        " AND t.status NOT IN ('aborted', 'setup_failed') AND t.outcome = 1) "
        f"FROM variants v WHERE v.task_id = ? ORDER BY v.created_at LIMIT {MAX_PAGE}",
        (task_id,),
    )
    return [
        {
            "variant_id": vid,
            "evaluator_name": ev,
            "instruction": ins,
            "created_at": ts,
            "trajectories": n,
            "success_rate": w / n if n else None,
        }
        for vid, ev, ins, ts, n, w in rows
    ]


def adaptation_history(
    conn: sqlite3.Connection, task_id: str, offset: int = 0, limit: int | None = None
) -> dict[str, Any]:
    """The task's adaptation events (proposals, decisions), newest first."""
    limit = clamp_limit(limit)
    where = "WHERE subject = ? AND kind LIKE 'adapt%'"
    total = _one(conn, f"SELECT COUNT(*) FROM events {where}", (task_id,))
    rows = conn.execute(
        f"SELECT id, kind, data_json, created_at FROM events {where} "
        "ORDER BY id DESC LIMIT ? OFFSET ?",
        (task_id, limit, max(0, offset)),
    )
    items = [{"id": i, "kind": k, "created_at": ts, **json.loads(d)} for i, k, d, ts in rows]
    return {"items": items, "total": total, "offset": max(0, offset), "limit": limit}


# trajectories ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TrajectoryFilter:
    """What the trajectory list can be narrowed to; None means any."""

    task_id: str | None = None
    outcome: int | None = None
    """1 or -1 (aborted trajectories have no outcome)."""
    policy_version: int | None = None
    aborted: str = "include"
    """include, exclude or only."""

    def where(self) -> tuple[str, list[Any]]:
        clauses, args = [], []
        if self.task_id is not None:
            clauses.append(f"{TASK_EXPR} = ?")
            args.append(self.task_id)
        if self.outcome is not None:
            clauses.append("t.outcome = ?")
            args.append(self.outcome)
        if self.policy_version is not None:
            clauses.append("t.policy_version_at_start = ?")
            args.append(self.policy_version)
        if self.aborted == "exclude":
            clauses.append("t.status NOT IN ('aborted', 'setup_failed')")
        elif self.aborted == "only":
            clauses.append("t.status IN ('aborted', 'setup_failed')")
        return " AND ".join(clauses) or "1", args


def encode_cursor(finished_at: float, trajectory_id: str) -> str:
    return f"{finished_at!r}|{trajectory_id}"


def decode_cursor(cursor: str) -> tuple[float, str]:
    ts, sep, tid = cursor.partition("|")
    if not sep:
        raise ValueError(f"bad cursor {cursor!r}: expected '<finished_at>|<trajectory id>'")
    return float(ts), tid


def trajectories_page(
    conn: sqlite3.Connection,
    flt: TrajectoryFilter = TrajectoryFilter(),  # noqa: B008 (frozen, never mutated)
    cursor: str | None = None,
    limit: int | None = None,
) -> dict[str, Any]:
    """One page of trajectory summaries, newest first, after `cursor`.

    `next_cursor` is None on the last page; `total` counts all matches."""
    limit = clamp_limit(limit)
    where, args = flt.where()
    total = _one(conn, f"SELECT COUNT(*) {TRAJ_FROM} WHERE {where}", tuple(args))
    page_where, page_args = where, list(args)
    if cursor:
        page_where += " AND (t.finished_at, t.trajectory_id) < (?, ?)"
        page_args += list(decode_cursor(cursor))
    rows = conn.execute(
        f"SELECT {', '.join(TRAJ_COLUMNS)}, {TASK_EXPR} {TRAJ_FROM} WHERE {page_where} "
        "ORDER BY t.finished_at DESC, t.trajectory_id DESC LIMIT ?",
        (*page_args, limit + 1),
    ).fetchall()
    items = [dict(zip(TRAJ_KEYS, r, strict=True)) for r in rows[:limit]]
    more = len(rows) > limit
    nxt = encode_cursor(items[-1]["finished_at"], items[-1]["trajectory_id"]) if more else None
    return {"items": items, "total": total, "next_cursor": nxt, "limit": limit}


def trajectory_summary(conn: sqlite3.Connection, trajectory_id: str) -> dict[str, Any] | None:
    row = conn.execute(
        f"SELECT {', '.join(TRAJ_COLUMNS)}, {TASK_EXPR} {TRAJ_FROM} WHERE t.trajectory_id = ?",
        (trajectory_id,),
    ).fetchone()
    return dict(zip(TRAJ_KEYS, row, strict=True)) if row else None
