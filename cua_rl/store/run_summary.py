"""What `cua-rl runs show` reports about one run store, read only.

Good work and lost work are counted apart: `trajectories`, `steps` and
`verdicts` (the keys `runs show --json` always had) count only trajectories that
ended by themselves (finished or step limit); aborted and set-up-failed ones are
counted under `aborted_*` keys, and the reasons they ended (aborts, give-ups,
reward-model failures, set-aside variants) are grouped by reason with a few
examples, so a run whose reward model never answered says why it has no verdicts.
"""

from __future__ import annotations

import re
import sqlite3
from collections import defaultdict
from typing import Any

from cua_rl.store.run_switches import saved_config, shown_settings, switches_on
from cua_rl.store.schema import ENDED, FAILURE_KINDS, STARTED

GOOD = "status NOT IN ('aborted', 'setup_failed')"
"""SQL condition of a trajectory that is good work (may be trained on / scored)."""

EXAMPLES_PER_REASON = 3

_URL = re.compile(r"https?://\S+")
_HEX = re.compile(r"\b[0-9a-f]{8,}\b")
_NUMBER = re.compile(r"\d+(\.\d+)?")


def reason_key(message: str) -> str:
    """The reason of an error message with its particulars (URLs, ids, numbers)
    masked, so that aborts for the same reason on different desktops, replicas
    and trajectories count together."""
    text = _URL.sub("<url>", message.strip().splitlines()[0] if message.strip() else "")
    text = _NUMBER.sub("N", _HEX.sub("<id>", text))
    return text[:160] or "(no reason recorded)"


def group_reasons(items: list[tuple[str, str]]) -> dict[str, dict[str, Any]]:
    """(subject, message) pairs -> {reason: {count, examples}}, most frequent first."""
    grouped: dict[str, dict[str, Any]] = {}
    for subject, message in items:
        entry = grouped.setdefault(reason_key(message), {"count": 0, "examples": []})
        entry["count"] += 1
        if len(entry["examples"]) < EXAMPLES_PER_REASON:
            entry["examples"].append({"subject": subject, "message": message})
    return dict(sorted(grouped.items(), key=lambda kv: -kv[1]["count"]))


def _one(db: sqlite3.Connection, sql: str) -> Any:
    return db.execute(sql).fetchone()[0]


def _lifecycle(events: list[dict[str, Any]], trajectory_span: tuple[Any, Any]) -> dict[str, Any]:
    """Kind, finished, wall time from the run's start/end events (a run store
    written before they existed reports kind `unknown`, finished None and the span
    of its trajectories as wall time)."""
    started = [e for e in events if e["kind"] == STARTED]
    ended = [e for e in events if e["kind"] == ENDED]
    out: dict[str, Any] = {"kind": "unknown", "finished": False, "end": None, "wall_s": None}
    if started:
        out["kind"] = started[0]["data"].get("kind", "unknown")
    last_end = ended[-1] if ended else None
    # finished: the last invocation (a resume is one more start) ended by itself.
    if last_end is not None and (
        not started or last_end["created_at"] >= started[-1]["created_at"]
    ):
        out["end"] = last_end["data"].get("status")
        out["finished"] = out["end"] == "finished"
        if last_end["data"].get("reason"):
            out["end_reason"] = last_end["data"]["reason"]
    if ended:  # wall time of every invocation (a resumed run adds up its parts)
        out["wall_s"] = round(sum(float(e["data"].get("wall_s", 0.0)) for e in ended), 1)
    elif trajectory_span[0] is not None:
        out["wall_s"] = round(trajectory_span[1] - trajectory_span[0], 1)
    if not started and not ended:
        out["finished"] = None  # written before runs recorded their start and end
    out["invocations"] = len(started)
    return out


def _per_version(db: sqlite3.Connection) -> list[dict[str, Any]]:
    rows = db.execute(
        f"SELECT policy_version_at_start, COUNT(*), AVG(score), AVG(outcome = 1) "
        f"FROM trajectories WHERE {GOOD} GROUP BY policy_version_at_start "
        f"ORDER BY policy_version_at_start"
    )
    return [
        {
            "policy_version": v,
            "trajectories": n,
            "mean_score": None if r is None else round(r, 4),
            "success_rate": round(s or 0.0, 4),
        }
        for v, n, r, s in rows
    ]


REPLAY_COUNTERS = (
    "replay_groups",
    "replay_stored",
    "replay_evicted_full",
    "replay_evicted_stale",
    "replay_buffer_trajectories",
)


def _replay(config: dict[str, Any], counters: dict[str, float]) -> dict[str, Any]:
    """Whether the training run replayed stored successes (`train.replay`, an
    ablation the paper has not: a reader must see it), and its counters when on."""
    replay = config.get("train", {}).get("replay")
    if not isinstance(replay, dict):
        return {}
    if not replay.get("enabled"):
        return {"replay": "off"}
    out: dict[str, Any] = {
        "replay": f"on (per_task {replay.get('per_task')}, max_lag {replay.get('max_lag')})"
    }
    out.update({name: int(counters.get(name, 0)) for name in REPLAY_COUNTERS})
    return out


def summarize(
    db: sqlite3.Connection, run_id: str, counters: dict[str, float], events: list[dict[str, Any]]
) -> dict[str, Any]:
    """The whole `runs show` summary of one store (see the module docstring)."""
    per_task: dict[str, dict[str, Any]] = {}
    for variant_id, n, wins in db.execute(
        f"SELECT variant_id, COUNT(*), SUM(outcome = 1) FROM trajectories WHERE {GOOD} "
        "GROUP BY variant_id ORDER BY variant_id"
    ):
        per_task[variant_id] = {"trajectories": n, "success_rate": (wins or 0) / n}
    bad_steps = (
        "SELECT COUNT(*) FROM steps s JOIN trajectories t "
        "ON t.trajectory_id = s.trajectory_id WHERE t.status IN "
        "('aborted', 'setup_failed')"
    )
    good_verdicts = (
        f"SELECT COUNT(*) FROM (SELECT DISTINCT v.trajectory_id, v.step_index "
        f"FROM votes v JOIN trajectories t ON t.trajectory_id = v.trajectory_id "
        f"WHERE t.{GOOD})"
    )
    all_verdicts = "SELECT COUNT(*) FROM (SELECT DISTINCT trajectory_id, step_index FROM votes)"
    out: dict[str, Any] = {
        "run_id": run_id,
        "trajectories": _one(db, f"SELECT COUNT(*) FROM trajectories WHERE {GOOD}"),
        "setup_failed": _one(db, "SELECT COUNT(*) FROM trajectories WHERE status = 'setup_failed'"),
        "steps": _one(
            db,
            f"SELECT COUNT(*) FROM steps WHERE trajectory_id IN "
            f"(SELECT trajectory_id FROM trajectories WHERE {GOOD})",
        ),
        "verdicts": _one(db, good_verdicts),
        "aborted": _one(db, "SELECT COUNT(*) FROM trajectories WHERE status = 'aborted'"),
    }
    for name in (
        "policy_updates",
        "prm_updates",
        "weight_syncs",
        "adapt_proposals",
        "adapt_accepted",
    ):
        out[name] = int(counters.get(name, 0))
    # New keys of training runs: what Algorithm 2 made of the groups (S u N), and
    # RL steps with and without an update.
    training = (
        "groups_original",
        "groups_accepted",
        "candidate_groups_rejected",
        "groups_empty",
        "adapt_no_rollouts",
        "policy_steps",
        "policy_steps_empty",
        "prm_steps",
        "prm_steps_empty",
    )
    for name in training if "policy_steps" in counters else ():
        out[name] = int(counters.get(name, 0))
    row = db.execute("SELECT config_json FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    config = saved_config(row[0] if row else None)
    out.update(shown_settings(config))  # e.g. train.sync.staggered
    out["counters"] = counters
    # New key: the opt-in switches (off in the paper) this run had on.
    out["switches"] = switches_on(config)
    out["tasks"] = per_task
    # New keys: lost work and why.
    out["aborted_steps"] = _one(db, bad_steps)
    out["aborted_verdicts"] = _one(db, all_verdicts) - out["verdicts"]
    failures = {
        kind: [
            (e["subject"], str(e["data"].get("reason", ""))) for e in events if e["kind"] == kind
        ]
        for kind in FAILURE_KINDS
    }
    out["gave_up"] = len(failures["gave_up"])
    out["judge_failures"] = max(
        len(failures["judge_failure"]), int(counters.get("judge_failures", 0))
    )
    out["set_aside"] = {subject: reason for subject, reason in failures["set_aside"]}
    lost = defaultdict(list)
    for status, tid, error in db.execute(
        "SELECT status, trajectory_id, error FROM trajectories "
        "WHERE status IN ('aborted', 'setup_failed') ORDER BY finished_at"
    ):
        lost[status].append((tid, error))
    out["reasons"] = {
        "abort": group_reasons(lost["aborted"]),
        "setup_failure": group_reasons(lost["setup_failed"]),
        "give_up": group_reasons(failures["gave_up"]),
        "judge_failure": group_reasons(failures["judge_failure"]),
    }
    span = db.execute("SELECT MIN(started_at), MAX(finished_at) FROM trajectories").fetchone()
    out.update(_lifecycle(events, span))
    if out["kind"] == "train" or "policy_steps" in counters:
        out.update(_replay(config, counters))
    out["versions"] = _per_version(db)
    return out
