"""SQLite schema of the run store.

One database per run directory, in WAL mode so several writer processes of the
same run (fleet workers, learners) and a reader (the viewer) can share it.
Every row carries the run id and the model versions that produced it, so a run
can be resumed and audited. Screenshots are not in the database: they are files
named by content hash next to it.
"""

from __future__ import annotations

SCHEMA_VERSION = 1

# Kinds of `events` rows the run itself writes (store/run_events.py); adding
# kinds needs no migration, so stores of schema 1 stay readable and writable.
STARTED = "run_started"
ENDED = "run_ended"
GAVE_UP = "gave_up"
JUDGE_FAILURE = "judge_failure"
SET_ASIDE = "set_aside"
UPDATE = "update"
"""One RL step of a learner that changed the weights: when its training started,
when it ended and when the weight sync that followed it ended (subject: role)."""
FAILURE_KINDS = (GAVE_UP, JUDGE_FAILURE, SET_ASIDE)
STEP_LABELS = "step_labels"
"""Good/bad labels of a trajectory's steps from some labeller (store/step_labels.py;
subject: trajectory id; data: `{"labels": [1, -1, null, ...], "source": "..."}`)."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    config_json TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS variants (
    variant_id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    domain TEXT NOT NULL,
    evaluator_name TEXT NOT NULL,
    instruction TEXT NOT NULL,
    spec_json TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS trajectories (
    trajectory_id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    variant_id TEXT NOT NULL,
    group_id TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL,
    score REAL,
    outcome INTEGER,
    policy_version_at_start INTEGER NOT NULL,
    n_steps INTEGER NOT NULL,
    screen_w INTEGER NOT NULL,
    screen_h INTEGER NOT NULL,
    error TEXT NOT NULL DEFAULT '',
    started_at REAL NOT NULL,
    finished_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS trajectories_by_variant ON trajectories(variant_id);
CREATE INDEX IF NOT EXISTS trajectories_by_group ON trajectories(group_id);
CREATE INDEX IF NOT EXISTS trajectories_by_finish ON trajectories(finished_at);
CREATE TABLE IF NOT EXISTS steps (
    trajectory_id TEXT NOT NULL,
    step_index INTEGER NOT NULL,
    run_id TEXT NOT NULL,
    screenshot_before TEXT NOT NULL,
    screenshot_after TEXT NOT NULL,
    response TEXT NOT NULL,
    actions_json TEXT NOT NULL,
    parse_error_json TEXT,
    code TEXT NOT NULL,
    token_ids_json TEXT NOT NULL,
    logprobs_json TEXT NOT NULL,
    policy_version INTEGER NOT NULL,
    timings_json TEXT NOT NULL,
    PRIMARY KEY (trajectory_id, step_index)
);
CREATE TABLE IF NOT EXISTS votes (
    trajectory_id TEXT NOT NULL,
    step_index INTEGER NOT NULL,
    vote_index INTEGER NOT NULL,
    run_id TEXT NOT NULL,
    score INTEGER NOT NULL,
    text TEXT NOT NULL,
    token_ids_json TEXT NOT NULL,
    logprobs_json TEXT NOT NULL,
    prm_version INTEGER NOT NULL,
    PRIMARY KEY (trajectory_id, step_index, vote_index)
);
CREATE TABLE IF NOT EXISTS counters (
    run_id TEXT NOT NULL,
    name TEXT NOT NULL,
    value REAL NOT NULL,
    PRIMARY KEY (run_id, name)
);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    subject TEXT NOT NULL,
    data_json TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS events_by_kind ON events(kind, subject);
CREATE TABLE IF NOT EXISTS routed_groups (
    group_id TEXT PRIMARY KEY,
    policy_version INTEGER NOT NULL,
    routed_at REAL NOT NULL,
    pruned INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS kept_screenshots (
    name TEXT PRIMARY KEY
);
"""
# routed_groups: each training group when the router built its samples (the learner's
# policy version then); `pruned` once screenshot retention went through it.
# kept_screenshots: the first and last screenshot of every pruned trajectory, which
# retention must keep even when a later group's middle step has the same content.
# Both tables are created by IF NOT EXISTS when a store is opened for writing, so an
# older store of schema 1 gains them without a migration.
