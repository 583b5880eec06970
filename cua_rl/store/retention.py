"""Screenshot retention: delete the screenshots of groups trained long ago (`store.retention`).

When the router builds a training group's samples it reads every screenshot of the
group once (`reward/samples.py`); after that only three things read them again: success
replay (the trajectories in its buffer), the viewer and `cua-rl export trajectories`.
So once a group was routed `after_updates` policy updates ago, its screenshots can go,
except:

- a screenshot any other trajectory still needs: every screenshot of a group not yet
  routed, or routed within the window, or of a trajectory in the success-replay buffer
  (screenshots are stored once per content, so one file can serve several steps);
- with `keep_successes`, every screenshot of a successful trajectory (score > 0), and
  of every other trajectory, with `keep_ends`, its first and last screenshot and, with
  `keep_every` k, the screenshot before steps 0, k, 2k, ... (all recorded in
  `kept_screenshots` as their group is pruned, so a later group with the same content
  cannot take them);
- a file written or re-written since the group was routed: `RunStore.put_screenshot`
  touches a file it finds already there, so an episode still running that took the
  same screen keeps it (the file is renamed aside, its time looked at again, and put
  back if it changed meanwhile, so a put racing the deletion is never lost).

Only files named like `screenshot_hash` names, inside `RUN/screenshots/`, are ever
deleted: a name in the store that is anything else is left alone. A group with a
member in the replay buffer stays unpruned and is looked at again next time, so its
other members go as soon as the success leaves the buffer.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path

from cua_rl.store.config import RetentionConfig

log = logging.getLogger(__name__)

SHOT_NAME = re.compile(r"[0-9a-f]{40}\.(png|jpg|bin)")
"""`screenshot_hash` names; nothing else is deleted."""
MTIME_SLACK_S = 2.0
"""A file whose time is within this of the group's routing is kept (file systems with
coarse timestamps round a touch down)."""


@dataclass
class PrunePlan:
    """What one pass deletes, decided on the store's thread."""

    groups: list[str] = field(default_factory=list)
    """Groups done by this pass (marked `pruned` after the files are gone)."""
    doomed: dict[str, float] = field(default_factory=dict)
    """Screenshot name -> the latest routing time among the pruned groups using it."""
    kept: set[str] = field(default_factory=set)
    """Screenshots of this pass's trajectories that stay for good: successes whole, of
    the others the ends and every k-th step's (`RetentionConfig`)."""


def mark_routed(db: sqlite3.Connection, group_id: str, version: int) -> None:
    """Record that a training group's samples were built at policy `version` (once)."""
    db.execute(
        "INSERT OR IGNORE INTO routed_groups(group_id, policy_version, routed_at) VALUES (?, ?, ?)",
        (group_id, version, time.time()),
    )


def plan_pruning(
    db: sqlite3.Connection, version: int, cfg: RetentionConfig, protected: frozenset[str]
) -> PrunePlan:
    """The screenshots of groups routed at `version - after_updates` or earlier that no
    kept trajectory needs; `protected`: trajectory ids that keep all of theirs."""
    limit = version - cfg.after_updates
    routed = dict(
        db.execute(
            "SELECT group_id, routed_at FROM routed_groups "
            "WHERE pruned = 0 AND policy_version <= ?",
            (limit,),
        )
    )
    plan = PrunePlan()
    if not routed:
        return plan
    members = db.execute(
        "SELECT t.trajectory_id, t.group_id, t.score FROM trajectories t WHERE t.group_id IN "
        "(SELECT value FROM json_each(?))",
        (json.dumps(list(routed)),),
    ).fetchall()
    held = {g for tid, g, _ in members if tid in protected}
    plan.groups = [g for g in routed if g not in held]
    used: dict[str, float] = {}
    for tid, group, score in members:
        if tid in protected:
            continue
        steps = db.execute(
            "SELECT screenshot_before, screenshot_after FROM steps "
            "WHERE trajectory_id = ? ORDER BY step_index",
            (tid,),
        ).fetchall()
        plan.kept.update(kept_of(steps, score, cfg))
        for name in (n for row in steps for n in row):
            used[name] = max(used.get(name, 0.0), routed[group])
    needed = _needed(db, limit, protected) | plan.kept
    needed |= _kept(db, list(used))
    plan.doomed = {n: t for n, t in used.items() if n not in needed}
    return plan


def kept_of(steps: list[tuple[str, str]], score: float | None, cfg: RetentionConfig) -> set[str]:
    """The screenshots of one trajectory (its steps' (before, after) in order, its
    evaluator score) that retention keeps for good (`RetentionConfig`)."""
    if not steps:
        return set()
    if cfg.keep_successes and score is not None and score > 0:
        return {n for row in steps for n in row}
    kept = {steps[0][0], steps[-1][1]} if cfg.keep_ends else set()
    if cfg.keep_every:
        kept.update(before for before, _ in steps[:: cfg.keep_every])
    return kept


def describe(cfg: RetentionConfig) -> str:
    """One line of what retention will delete in a run with `cfg` (`train` logs it at
    its start, so nobody learns it only when an export skips trajectories)."""
    if not cfg.enabled:
        return "screenshot retention: off, every screenshot is kept"
    kept = ["every screenshot of a successful trajectory"] if cfg.keep_successes else []
    parts = ["the first", "the last"] if cfg.keep_ends else []
    if cfg.keep_every:
        k = cfg.keep_every
        parts.append(f"the one before steps 0, {k}, {2 * k}, ..." if k > 1 else "every one")
    if parts:
        whose = "of the others" if cfg.keep_successes else "of every trajectory"
        kept.append(
            f"{whose}, {', '.join(parts[:-1])} and {parts[-1]}"
            if len(parts) > 1
            else f"{whose}, {parts[0]}"
        )
    kept.append("everything of the trajectories in the success-replay buffer")
    return (
        f"screenshot retention: {cfg.after_updates} policy updates after a group was "
        f"trained, its screenshots are deleted except: {'; '.join(kept)} "
        "(store.retention.enabled=false keeps everything)"
    )


def _needed(db: sqlite3.Connection, limit: int, protected: frozenset[str]) -> set[str]:
    """Every screenshot of a trajectory whose group is not prunable (not routed, or
    routed after `limit`) or that is protected."""
    rows = db.execute(
        "SELECT s.screenshot_before, s.screenshot_after FROM trajectories t "
        "LEFT JOIN routed_groups r ON r.group_id = t.group_id "
        "JOIN steps s ON s.trajectory_id = t.trajectory_id "
        "WHERE r.group_id IS NULL OR r.policy_version > ? "
        "OR t.trajectory_id IN (SELECT value FROM json_each(?))",
        (limit, json.dumps(sorted(protected))),
    )
    return {n for row in rows for n in row}


def _kept(db: sqlite3.Connection, names: list[str]) -> set[str]:
    rows = db.execute(
        "SELECT name FROM kept_screenshots WHERE name IN (SELECT value FROM json_each(?))",
        (json.dumps(names),),
    )
    return {r[0] for r in rows}


def finish_pruning(db: sqlite3.Connection, plan: PrunePlan) -> None:
    """Mark the pass's groups pruned and remember what it kept (after the deletions: a
    pass cut short is simply done again)."""
    db.executemany(
        "INSERT OR IGNORE INTO kept_screenshots(name) VALUES (?)", [(n,) for n in sorted(plan.kept)]
    )
    db.executemany(
        "UPDATE routed_groups SET pruned = 1 WHERE group_id = ?", [(g,) for g in plan.groups]
    )


def delete_screenshots(shots_dir: Path, doomed: dict[str, float]) -> tuple[int, int]:
    """Delete the doomed files not touched since their group's routing; (files, bytes).
    A file that cannot be handled is left and logged once per pass."""
    root = shots_dir.resolve()
    files = size = 0
    failed: list[str] = []
    for name, routed_at in doomed.items():
        if not SHOT_NAME.fullmatch(name):
            continue  # a name the store should never hold: not a file of ours
        path = (root / name[:2] / name).resolve()
        if not path.is_relative_to(root):
            continue
        try:
            gone = _delete_unless_touched(path, routed_at - MTIME_SLACK_S)
        except OSError as exc:
            failed.append(f"{name} ({exc.strerror})")
            continue
        if gone:
            files, size = files + 1, size + gone
    if failed:
        log.warning("screenshot retention: %d file(s) not deleted, e.g. %s", len(failed), failed[0])
    return files, size


def _delete_unless_touched(path: Path, cutoff: float) -> int:
    """Bytes freed (0: kept or absent). The file is renamed aside before its time is
    read a last time: a put that touched it before the rename shows in that time (the
    file goes back), one after the rename finds no file and writes it anew."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return 0
    if not path.is_file() or st.st_mtime >= cutoff:
        return 0
    aside = path.with_name(f"{path.name}.{os.getpid()}.prune")
    os.rename(path, aside)
    st = aside.stat()
    if st.st_mtime >= cutoff:
        os.replace(aside, path)
        return 0
    aside.unlink()
    return st.st_size
