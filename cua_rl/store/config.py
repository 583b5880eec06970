"""What the run store keeps on disk over a long run (`store.*` of a run's config).

A run of days (240 updates of 96 rollouts of up to 30 steps) would otherwise keep
every screenshot it ever took: about 690,000 of them, 100-200 GB at full-HD JPEG.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class RetentionConfig(BaseModel):
    """Deleting the screenshots of task groups trained long ago (`store/retention.py`).

    On by default with a generous window: the middle screenshots of a group routed to
    the learners more than `after_updates` policy updates ago are read by nothing the
    run does any more (its samples were built when it was routed), and screenshots are
    about 70 % of what a run adds to its directory (docs/soak.md). What stays:
    everything of groups not yet routed or routed within the window, every trajectory
    in the success-replay buffer, and (with `keep_ends`) the first and the last
    screenshot of every trajectory, so the viewer still shows how each episode began
    and ended. Turn it off for a run whose trajectories
    you mean to export whole (`cua-rl export trajectories` skips a trajectory with a
    deleted screenshot and counts it under `missing_screenshot`).
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
    keep_ends: bool = True
    """Keep the first (`screenshot_before` of step 0) and the last (`screenshot_after`
    of the last step) screenshot of every trajectory, so the viewer shows how each
    episode began and ended; a deleted one shows a "screenshot not kept" image."""


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
