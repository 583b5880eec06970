"""What a soaked run lost or did twice, from what its store and metrics.jsonl hold.

A finished episode is stored with all its steps in one transaction, and a task
group reaches the learners (is routed) once all its slots have ended, in the order
groups complete (`rollout/scheduler.py`, `runtime/group_router.py`). So loss can
show in the store in three ways, and `trajectories_lost` is their sum:

- `reported_not_stored`: finished episodes the run reported (`trajectories` of the
  `rollout` records of metrics.jsonl, one per group routed) beyond the good
  trajectories the store holds (as `bench faults` counts them);
- `orphan_steps`: trajectories whose steps are in the `steps` table but which have
  no `trajectories` row (a torn write: never expected, checked anyway);
- `unrouted`: good trajectories of groups complete in the store (good rows plus
  give-ups reach the group's size) that were never routed: the store's routed count
  (`groups_original + groups_accepted + candidate_groups_rejected + groups_empty`)
  is below the complete groups; routing follows completion order, so the unrouted
  are the last completed. A group completed within `grace_s` of a stop request (the
  final one, or a SIGTERM before a `--resume` mid-soak) is cut by that stop (its
  verdicts were still being collected, or its routing was cancelled), not lost: as
  many unrouted groups as completed near a stop are excused.

Groups opened and still incomplete when the run was stopped are in flight, not
lost: they are reported apart (`groups_in_flight_at_stop`).

A Ray run that lost a fleet worker (its node died, `worker_lost` events) had
episodes in flight on it: their rollouts were re-queued and ran again elsewhere
(`rollouts_requeued_with_node`, in `groups_requeued_with_node` groups). An episode
of the lost worker may have been stored before its group took it: such a row
belongs to no group. Once the group is routed, a `group_after_worker_lost` event
names the trajectories it was routed with, so its other good rows are
`trajectories_lost_with_node` (in flight on the dead node, never complete, never
trained on: not in `trajectories_lost`) and are not counted as its members. Of a
re-queued group still open at the stop (`groups_requeued_open_at_stop`) the rows
cannot be told apart: as many rows as it had rollouts re-queued are not counted as
members, so it never looks complete by the lost worker's rows.

`updates_duplicated`: a learner version recorded more than once, from the store's
`update` events (subject: role, data.version), and from metrics.jsonl (a version
logged twice or skipped, `faults.cases.updates_duplicated`); the larger of the two
(the same duplicate shows in both).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cua_rl.bench.faults.cases import metrics_records
from cua_rl.bench.faults.cases import updates_duplicated as metrics_duplicates
from cua_rl.store.read_only import connect_read_only
from cua_rl.store.run_store import RunStore
from cua_rl.store.schema import GAVE_UP, UPDATE

WORKER_LOST = "worker_lost"
ROUTED_AFTER_LOSS = "group_after_worker_lost"
"""Events of a Ray run's driver (runtime/ray/fleet.py)."""

ROUTED_COUNTERS = (
    "groups_original",
    "groups_accepted",
    "candidate_groups_rejected",
    "groups_empty",
)
BAD = ("aborted", "setup_failed")


def updates_duplicated(run_dir: Path) -> dict[str, int]:
    """Versions trained twice: per source and `total` (module docstring)."""
    store = RunStore.read_only(run_dir)
    try:
        seen = Counter((e["subject"], int(e["data"]["version"])) for e in store.events(UPDATE))
    finally:
        store.close()
    from_store = sum(n - 1 for n in seen.values())
    from_metrics = metrics_duplicates(run_dir)
    return {
        "store_events": from_store,
        "metrics_jsonl": from_metrics,
        "total": max(from_store, from_metrics),
        "policy_updates": sum(1 for role, _ in seen if role == "policy"),
        "prm_updates": sum(1 for role, _ in seen if role == "prm"),
    }


def _orphan_steps(run_dir: Path) -> int:
    db = connect_read_only(run_dir / "run.sqlite")
    try:
        return db.execute(
            "SELECT COUNT(DISTINCT s.trajectory_id) FROM steps s LEFT JOIN "
            "trajectories t ON t.trajectory_id = s.trajectory_id "
            "WHERE t.trajectory_id IS NULL"
        ).fetchone()[0]
    finally:
        db.close()


def group_ledger(
    records: list[dict[str, Any]], gave_up: list[dict[str, Any]], group_size: int
) -> dict[str, dict[str, Any]]:
    """group id -> its good trajectories, give-ups, whether complete and when its
    last slot ended (the newest row's `finished_at`)."""
    groups: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"good": 0, "gave_up": 0, "last_at": 0.0}
    )
    for r in records:
        if not r["group_id"]:
            continue
        g = groups[r["group_id"]]
        g["good"] += r["status"] not in BAD
        g["last_at"] = max(g["last_at"], float(r["finished_at"]))
    for event in gave_up:
        group_id = event["data"].get("group_id")
        if group_id:
            g = groups[group_id]
            g["gave_up"] += 1
            g["last_at"] = max(g["last_at"], float(event["created_at"]))
    for g in groups.values():
        g["complete"] = g["good"] + g["gave_up"] >= group_size
    return dict(groups)


def node_losses(
    records: list[dict[str, Any]], lost: list[dict[str, Any]], routed_after: list[dict[str, Any]]
) -> dict[str, Any]:
    """What lost fleet workers took along (module doc): figures, and per group the
    good rows that are not its members (`not_members`)."""
    requeued: Counter[str] = Counter()
    for event in lost:
        for group_id, _slot in event["data"].get("requeued", []):
            requeued[group_id] += 1
    members = {e["data"]["group_id"]: set(e["data"]["trajectories"]) for e in routed_after}
    not_members: Counter[str] = Counter()
    superseded = 0
    for r in records:
        group_id = r["group_id"]
        if (
            group_id in members
            and r["status"] not in BAD
            and r["trajectory_id"] not in members[group_id]
        ):
            not_members[group_id] += 1
            superseded += 1
    open_at_stop = [g for g in requeued if g not in members]
    for group_id in open_at_stop:
        not_members[group_id] += requeued[group_id]
    return {
        "not_members": not_members,
        "figures": {
            "workers_lost": len(lost),
            "rollouts_requeued_with_node": sum(requeued.values()),
            "groups_requeued_with_node": len(requeued),
            "groups_requeued_open_at_stop": len(open_at_stop),
            "trajectories_lost_with_node": superseded,
        },
    }


def lost_from(
    groups: dict[str, dict[str, Any]], routed: int, stops: Sequence[float], grace_s: float
) -> dict[str, int]:
    """`unrouted` trajectories and groups, groups cut by a stop and in flight.

    Complete groups beyond the routed count were never routed; as many of them as
    completed within `grace_s` of a stop request (`stops`: the final one and any
    mid-run SIGTERM) are cut by that stop, the rest are lost: the newest complete
    groups away from every stop (routing follows completion order)."""
    complete = sorted((g for g in groups.values() if g["complete"]), key=lambda g: g["last_at"])
    gap = max(0, len(complete) - routed)

    def near_stop(g: dict[str, Any]) -> bool:
        return any(s - grace_s <= g["last_at"] <= s + grace_s for s in stops)

    cut = min(gap, sum(1 for g in complete if near_stop(g)))
    far = [g for g in complete if not near_stop(g)]
    lost = far[len(far) - (gap - cut) :] if gap > cut else []
    return {
        "unrouted": sum(g["good"] for g in lost),
        "groups_unrouted": len(lost),
        "groups_cut_by_stop": cut,
        "groups_in_flight_at_stop": sum(1 for g in groups.values() if not g["complete"]),
        "groups_complete": len(complete),
        "groups_routed": routed,
    }


def trajectories_lost(
    run_dir: Path,
    *,
    group_size: int,
    stopped_at: float,
    grace_s: float = 60.0,
    stops: Sequence[float] = (),
) -> dict[str, int]:
    """The parts of `trajectories_lost` and their sum `total` (module docstring).
    `stopped_at`: epoch seconds when the run was asked to stop at the end; `stops`:
    earlier stop requests (a SIGTERM then `--resume` mid-soak)."""
    store = RunStore.read_only(run_dir)
    try:
        records = store.trajectory_records()
        gave_up = store.events(GAVE_UP)
        counters = store.counters()
        nodes = node_losses(records, store.events(WORKER_LOST), store.events(ROUTED_AFTER_LOSS))
    finally:
        store.close()
    good = sum(1 for r in records if r["status"] not in BAD)
    groups = group_ledger(records, gave_up, group_size)
    for group_id, extra in nodes["not_members"].items():
        if group_id in groups:
            g = groups[group_id]
            g["good"] = max(0, g["good"] - extra)
            g["complete"] = g["good"] + g["gave_up"] >= group_size
    good -= nodes["figures"]["trajectories_lost_with_node"]
    reported = sum(
        int(r.get("trajectories", 0))
        for r in metrics_records(run_dir)
        if r.get("scope") == "rollout"
    )
    routed = int(sum(counters.get(name, 0) for name in ROUTED_COUNTERS))
    out = {
        "reported_not_stored": max(0, reported - good),
        "orphan_steps": _orphan_steps(run_dir),
        **lost_from(groups, routed, [*stops, stopped_at], grace_s),
        **nodes["figures"],
        "good_trajectories": good,
        "reported": reported,
    }
    out["total"] = out["reported_not_stored"] + out["orphan_steps"] + out["unrouted"]
    return out
