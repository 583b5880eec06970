"""What the run store keeps on disk over a long run (`store.*` of a run's config).

A run of days (240 updates of 96 rollouts of up to 30 steps) would otherwise keep
every screenshot it ever took: about 690,000 of them, 100-200 GB at full-HD JPEG.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class RetentionConfig(BaseModel):
    """Deleting the screenshots of task groups trained long ago (`store/retention.py`).

    On by default with a generous window, and never touching what an export of the
    run's successes needs: the middle screenshots of a group routed to the learners
    more than `after_updates` policy updates ago are read by nothing the run does any
    more (its samples were built when it was routed), and screenshots are about 70 %
    of what a run adds to its directory (docs/soak.md). What stays: everything of
    groups not yet routed or routed within the window, every trajectory in the
    success-replay buffer, every screenshot of a successful trajectory
    (`keep_successes`: `cua-rl export trajectories --success-only` writes every success
    whole), and of every other trajectory the first, the last (`keep_ends`) and every
    `keep_every`-th step's screenshot, so the viewer still shows how each episode
    began, went and ended. `cua-rl train` says at its start what will be pruned.
    `enabled: false` keeps everything (docs/run-store.md, "Keeping everything").
    """

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    """Delete screenshots of groups trained more than `after_updates` updates ago."""
    after_updates: int = Field(10, ge=1)
    """Policy updates after a group's routing before its screenshots may go. The run
    itself needs none of them after the routing (success replay's buffered trajectories
    are kept whatever their age); 10 keeps the recent groups whole for the viewer and
    is well past `fleet.eta` (2), so a group is never pruned while its samples could
    still be trained."""
    keep_successes: bool = True
    """Keep every screenshot of a successful trajectory (evaluator score > 0, the
    trajectories `export trajectories --success-only` writes), so every success of a
    run can be exported whole for SFT or rejection sampling."""
    keep_ends: bool = True
    """Keep the first (`screenshot_before` of step 0) and the last (`screenshot_after`
    of the last step) screenshot of every trajectory, so the viewer shows how each
    episode began and ended; a deleted one shows a "screenshot not kept" image."""
    keep_every: int = Field(5, ge=0)
    """Also keep the screenshot before every k-th step (steps 0, k, 2k, ...) of every
    trajectory: the viewer shows how an episode went at a glance. 0: none."""


class StoreConfig(BaseModel):
    """The run store's disk upkeep."""

    model_config = ConfigDict(extra="forbid")

    retention: RetentionConfig = Field(default_factory=RetentionConfig)
    """Which screenshots of trained groups are deleted."""
    wal_limit_mb: int = Field(64, ge=1)
    """SQLite's `journal_size_limit`: after a checkpoint the WAL file is cut back to this
    size. The writer also checkpoints (TRUNCATE, waiting at most 2 s for readers) after
    every policy update, so a reader that keeps the viewer open cannot make the WAL grow
    for the whole run."""
