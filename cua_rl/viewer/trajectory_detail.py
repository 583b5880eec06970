"""One trajectory as the viewer shows it: steps, the m votes per step, and the
step reward and advantage the learner derives from them.

Rewards and advantages are recomputed with the learner's own functions
(`cua_rl.reward.advantages`) over the trajectory's task group as stored, so
what the page shows is what was (or will be) trained on, not a second
implementation that could drift. Token ids and logprobs stay out: they are the
bulk of a step row and a person reading a trajectory does not need them.
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from typing import Any

from cua_rl.reward.advantages import policy_advantages, step_rewards
from cua_rl.reward.config import RewardConfig
from cua_rl.viewer.queries import run_reward, trajectory_summary

MAX_STEPS = 1000
"""Steps returned per trajectory (episodes are capped far below this)."""
MAX_GROUP = 64
"""Group members read to standardize advantages (groups are G = 8 by default)."""


def _votes_by_step(
    conn: sqlite3.Connection, trajectory_ids: list[str]
) -> dict[str, dict[int, list[int]]]:
    marks = ", ".join("?" * len(trajectory_ids))
    out: dict[str, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    for tid, idx, score in conn.execute(
        f"SELECT trajectory_id, step_index, score FROM votes WHERE trajectory_id IN ({marks}) "
        "ORDER BY trajectory_id, step_index, vote_index",
        trajectory_ids,
    ):
        out[tid][idx].append(score)
    return out


def group_rewards(
    conn: sqlite3.Connection, summary: dict[str, Any], reward: RewardConfig
) -> tuple[list[float] | None, dict[int, float]]:
    """The policy's step rewards R_i (Eq. 1, with the run's outcome weight and policy
    lambda) of this trajectory and its advantage per step index.

    Only trajectories with an outcome take part, as in the learner: an aborted
    trajectory has neither. Members of the group are this trajectory's `group_id`
    (a trajectory without one is a group of one and keeps its raw rewards)."""
    if summary["outcome"] is None:
        return None, {}
    tid = summary["trajectory_id"]
    members = [(tid, summary["outcome"], summary["n_steps"])]
    if summary["group_id"]:
        members += conn.execute(
            "SELECT trajectory_id, outcome, n_steps FROM trajectories WHERE group_id = ? "
            "AND trajectory_id != ? AND outcome IS NOT NULL AND status != 'aborted' "
            "ORDER BY finished_at LIMIT ?",
            (summary["group_id"], tid, MAX_GROUP - 1),
        ).fetchall()
    votes = _votes_by_step(conn, [m[0] for m in members])
    rewards = {
        mid: step_rewards(
            outcome,
            [votes[mid].get(i, []) for i in range(n_steps)],
            reward.policy_lam,
            reward.outcome_weight,
        )
        for mid, outcome, n_steps in members
    }
    advantages = {
        a.step_index: a.advantage for a in policy_advantages(rewards) if a.trajectory_id == tid
    }
    return rewards[tid], advantages


def trajectory_detail(conn: sqlite3.Connection, trajectory_id: str) -> dict[str, Any] | None:
    """Everything the trajectory page shows, or None if the id is unknown."""
    summary = trajectory_summary(conn, trajectory_id)
    if summary is None:
        return None
    variant = conn.execute(
        "SELECT instruction, evaluator_name, domain FROM variants WHERE variant_id = ?",
        (summary["variant_id"],),
    ).fetchone()
    votes: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for idx, score, text, prm_version in conn.execute(
        "SELECT step_index, score, text, prm_version FROM votes WHERE trajectory_id = ? "
        "AND step_index < ? ORDER BY step_index, vote_index",
        (trajectory_id, MAX_STEPS),
    ):
        votes[idx].append({"score": score, "text": text, "prm_version": prm_version})
    reward = run_reward(conn)
    rewards, advantages = group_rewards(conn, summary, reward)
    steps = []
    for idx, before, after, response, actions, parse_error, code, version, timings in conn.execute(
        "SELECT step_index, screenshot_before, screenshot_after, response, actions_json, "
        "parse_error_json, code, policy_version, timings_json FROM steps "
        "WHERE trajectory_id = ? ORDER BY step_index LIMIT ?",
        (trajectory_id, MAX_STEPS),
    ):
        step_votes = votes.get(idx, [])
        steps.append(
            {
                "index": idx,
                "screenshot_before": before,
                "screenshot_after": after,
                "response": response,
                "actions": json.loads(actions),
                "parse_error": json.loads(parse_error) if parse_error else None,
                "code": code,
                "policy_version": version,
                "timings": json.loads(timings),
                "votes": step_votes,
                "mean_vote": (
                    sum(v["score"] for v in step_votes) / len(step_votes) if step_votes else None
                ),
                "reward": rewards[idx] if rewards is not None and idx < len(rewards) else None,
                "advantage": advantages.get(idx, 0.0) if rewards is not None else None,
            }
        )
    return {
        **summary,
        "instruction": variant[0] if variant else None,
        "evaluator_name": variant[1] if variant else None,
        "domain": variant[2] if variant else None,
        "lambda": reward.policy_lam,
        "outcome_weight": reward.outcome_weight,
        "steps": steps,
        "steps_truncated": summary["n_steps"] > MAX_STEPS,
    }
