"""Success replay (DART-GUI, ARPO; off by default, not part of RLAnything): per task
variant, a bounded buffer of successful trajectories; a training group in which
no rollout succeeded has one rollout replaced by a stored success, so its
advantages are not all zero (docs/algorithms.md, "Success replay").

Why per task *variant* (`variant_id`), not per task: a success is judged by the
variant's own evaluator, and its prompts are rebuilt with the variant's
instruction; a stored success of another instruction would be trained under a
prompt its behaviour logprobs were not sampled from.

Why references, not copies: the run store already holds each trajectory (steps,
prompt screenshots, responses, actions, token ids, behaviour logprobs, policy
versions) and its verdicts (from which its step rewards are recomputed). The
buffer keeps (trajectory id, group id, behaviour version) and loads the rest when
it replays, so its memory is a few bytes per entry whatever the episode length,
and its state is a small JSON for `--resume`.

Invariants:
- success is `Trajectory.outcome == 1` (evaluator score > 0), as `GroupRecord.accuracy`;
- only a group with no success and at least two scored rollouts is changed: its
  last rollout in slot order is replaced (every member failed, so which one says
  nothing; the last keeps the choice deterministic without an RNG);
- the replayed success is the buffer's freshest (highest behaviour version, then
  newest); it stays in the buffer (it may be replayed again) until a newer success
  pushes it out (`per_task`, FIFO) or it is more than `max_lag` updates behind the
  learner (evicted, counted, never replayed);
- the selector, the group's success rate and the stored trajectories never see the
  replacement: only the samples built for the learners do.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import deque
from dataclasses import dataclass
from typing import Any

from cua_rl.config.train import ReplayConfig
from cua_rl.store.async_run_store import AsyncRunStore
from cua_rl.types import GroupRecord, Trajectory

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class StoredSuccess:
    """A successful trajectory of the run store, by reference."""

    trajectory_id: str
    group_id: str
    """The group it succeeded in."""
    version: int
    """Its oldest behaviour version (the policy that sampled its earliest step)."""


@dataclass(frozen=True, slots=True)
class ReplayedGroup:
    """A group as the learners train it: as sampled, or with one member replaced."""

    group: GroupRecord
    replayed: Trajectory | None = None
    """The stored success put into the group, with its stored logprobs and versions."""
    replaced: Trajectory | None = None
    """The failed rollout it replaced (its steps train nothing)."""
    lag: int = 0
    """Learner version minus the replayed success's behaviour version."""

    @property
    def replayed_ids(self) -> frozenset[str]:
        return frozenset({self.replayed.id} if self.replayed else ())


def behaviour_version(traj: Trajectory) -> int:
    """The oldest policy version among its steps (a rollout may span a weight sync)."""
    return min((s.policy_version for s in traj.steps), default=traj.policy_version_at_start)


class SuccessReplay:
    """The buffers and the replacement rule; counters go to the run store
    (`replay_stored`, `replay_groups`, `replay_evicted_full`, `replay_evicted_stale`,
    and the gauge `replay_buffer_trajectories`)."""

    def __init__(self, cfg: ReplayConfig, store: AsyncRunStore) -> None:
        self.cfg, self.store = cfg, store
        self._buffers: dict[str, deque[StoredSuccess]] = {}
        self._last: tuple[str, ReplayedGroup] | None = None

    @property
    def size(self) -> int:
        """Stored successes over all task variants."""
        return sum(len(b) for b in self._buffers.values())

    def buffer(self, variant_id: str) -> tuple[StoredSuccess, ...]:
        """One variant's stored successes, oldest first."""
        return tuple(self._buffers.get(variant_id, ()))

    async def apply(self, group: GroupRecord, learner_version: int) -> ReplayedGroup:
        """Store the group's successes, or replace a member of a zero-success group.
        Disabled: the group unchanged and nothing stored."""
        out = ReplayedGroup(group)
        if not self.cfg.enabled:
            return out
        wins = [t for t in group.trajectories if t.outcome == 1]
        for traj in wins:
            if traj.steps:  # an episode without steps has nothing to train
                await self._add(group, traj)
        if not wins and len(group.trajectories) >= 2:
            out = await self._replace(group, learner_version)
        await self.store.set_counter("replay_buffer_trajectories", self.size)
        self._last = (group.group_id, out)
        return out

    async def _add(self, group: GroupRecord, traj: Trajectory) -> None:
        buf = self._buffers.setdefault(group.variant.variant_id, deque())
        buf.append(StoredSuccess(traj.id, group.group_id, behaviour_version(traj)))
        await self.store.incr("replay_stored")
        while len(buf) > self.cfg.per_task:
            buf.popleft()
            await self.store.incr("replay_evicted_full")

    async def _replace(self, group: GroupRecord, learner_version: int) -> ReplayedGroup:
        stored = await self._freshest(group.variant.variant_id, learner_version)
        if stored is None:
            return ReplayedGroup(group)
        try:
            success = await self.store.load_trajectory(stored.trajectory_id)
            verdicts = tuple(await self.store.load_verdicts(stored.trajectory_id))
        except KeyError as exc:  # never expected in one run dir: lose the entry, not the run
            self._drop(group.variant.variant_id, stored)
            _log.warning(
                "success replay: %s; group %s trains as sampled", exc.args[0], group.group_id
            )
            return ReplayedGroup(group)
        replaced = group.trajectories[-1]
        members = (*group.trajectories[:-1], success)
        by_id = {t.id: group.verdicts.get(t.id, ()) for t in group.trajectories[:-1]}
        record = dataclasses.replace(
            group, trajectories=members, verdicts={**by_id, success.id: verdicts}
        )
        lag = learner_version - stored.version
        await self.store.incr("replay_groups")
        await self.store.add_event(
            "success_replay",
            group.group_id,
            {
                "replayed": success.id,
                "from_group": stored.group_id,
                "replaced": replaced.id,
                "behaviour_version": stored.version,
                "learner_version": learner_version,
                "lag": lag,
            },
        )
        return ReplayedGroup(record, replayed=success, replaced=replaced, lag=lag)

    async def _freshest(self, variant_id: str, learner_version: int) -> StoredSuccess | None:
        """The variant's freshest stored success within `max_lag`, after evicting
        (and counting) every one that is older."""
        buf = self._buffers.get(variant_id)
        if not buf:
            return None
        kept = [s for s in buf if learner_version - s.version <= self.cfg.max_lag]
        if len(kept) < len(buf):
            await self.store.incr("replay_evicted_stale", len(buf) - len(kept))
            buf.clear()
            buf.extend(kept)
        # max() keeps the first of equals: reversed, that is the newest
        return max(reversed(kept), key=lambda s: s.version, default=None)

    def _drop(self, variant_id: str, stored: StoredSuccess) -> None:
        buf = self._buffers.get(variant_id)
        if buf is not None and stored in buf:
            buf.remove(stored)

    def metrics(self, group_id: str) -> dict[str, float]:
        """This group's replay values for metrics.jsonl (none when disabled)."""
        if not self.cfg.enabled:
            return {}
        out = {
            "replay_buffer_trajectories": float(self.size),
            "replay_buffer_tasks": float(sum(1 for b in self._buffers.values() if b)),
            "replay_replayed": 0.0,
        }
        if self._last is not None and self._last[0] == group_id and self._last[1].replayed:
            out["replay_replayed"] = 1.0
            out["replay_lag"] = float(self._last[1].lag)
        return out

    def trajectory_ids(self) -> frozenset[str]:
        """Every buffered success: screenshot retention keeps all their screenshots."""
        return frozenset(s.trajectory_id for buf in self._buffers.values() for s in buf)

    def state_dict(self) -> dict[str, Any]:
        return {
            v: [[s.trajectory_id, s.group_id, s.version] for s in buf]
            for v, buf in self._buffers.items()
            if buf
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._buffers = {
            v: deque(StoredSuccess(t, g, int(n)) for t, g, n in rows) for v, rows in state.items()
        }
