"""The template selector: the task source of a training run, and the place where
task groups turn into adaptation decisions.

It hands out each task's current variant round-robin. After a task group: a
group of a pending candidate q' is judged against its parent (accepted q'
replaces q, with its history kept); a group of a current variant whose accuracy
is outside the band gets a proposal, which joins the next sampling round as a
temporary task. A task has at most one pending candidate. Every proposal and
decision is an event in the run store, and `state_dict` captures everything a
resumed run needs.

Training data is S u N of Algorithm 2 (lines 37-42): `on_group` returns what a
group is (`GroupUse`): `original` (a group of a task version: trains), `accepted`
(the candidate's own group, accepted by it: trains), `rejected` (a candidate's
group that did not pass: decides and nothing else) or `empty` (every rollout was
given up: trains nothing; a candidate's empty group is rejected as
`no_rollouts`, so no task is ever left waiting on a decision).

Every candidate has a variant id never used before in the run: a rewrite equal
to the task's current or any earlier version, or to a rejected candidate, is not
a candidate (the rewriter is told to skip them, and a rewrite that still equals
one is dropped with a note). A rejected candidate is never proposed again; the
critique is asked for only when the rewriter would read it.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from cua_rl.adapt.acceptance import AdaptBand, Direction
from cua_rl.adapt.critique import Critic
from cua_rl.adapt.rewriter import Key, Rewrite, Rewriter, TaskTemplate, variant_key
from cua_rl.store.async_run_store import AsyncRunStore
from cua_rl.types import GroupRecord, TaskVariant

log = logging.getLogger(__name__)

GroupUse = Literal["original", "accepted", "rejected", "empty"]
"""What a finished group is to the learners (see the module docstring)."""
TRAINS: frozenset[str] = frozenset({"original", "accepted"})


@dataclass
class Proposal:
    candidate: TaskVariant
    parent: TaskVariant
    direction: Direction
    acc_parent: float
    summaries: list[str] = field(default_factory=list)


class TemplateSelector:
    def __init__(
        self,
        templates: dict[str, TaskTemplate],
        start: dict[str, TaskVariant],
        *,
        band: AdaptBand,
        rewriter: Rewriter,
        store: AsyncRunStore,
        critic: Critic | None = None,
    ) -> None:
        self.templates = templates
        self.current = dict(start)
        self.band = band
        self.rewriter = rewriter
        self.critic = critic
        self.store = store
        self.pending: dict[str, Proposal] = {}
        self.accuracy: dict[str, float] = {}
        """Latest group accuracy per variant id (the PRM sample filter reads it)."""
        self._queue: deque[TaskVariant] = deque()
        self._turn = 0
        self._revisions: dict[str, int] = {}
        self._trainable = {v.variant_id for v in start.values()}
        """Variant ids that were, at some point, an original or an accepted task."""
        self._rejected: dict[str, set[Key]] = {}
        """Per task, the (evaluator, instruction) of rejected candidates: never re-proposed."""
        self._versions: dict[str, list[Key]] = {t: [variant_key(v)] for t, v in start.items()}
        """Per task, the keys of its original and every accepted version, in order."""
        self._ids: set[str] = set(self._trainable)
        """Every variant id handed out in this run (ids are never reused)."""

    # task source -------------------------------------------------------------

    async def next_variant(self) -> TaskVariant | None:
        if self._queue:
            return self._queue.popleft()
        task_ids = list(self.current)
        if not task_ids:
            return None
        task_id = task_ids[self._turn % len(task_ids)]
        self._turn += 1
        return self.current[task_id]

    def upcoming(self, groups: int) -> list[TaskVariant]:
        """What `next_variant` would give for the next `groups` groups as things stand
        (queued candidates first, then the round-robin), without giving them: the
        scheduler's look-ahead for spare desktops (`scheduler.Forecast`)."""
        out = list(self._queue)[:groups]
        task_ids = list(self.current)
        for k in range(groups - len(out) if task_ids else 0):
            out.append(self.current[task_ids[(self._turn + k) % len(task_ids)]])
        return out

    # decisions ---------------------------------------------------------------

    async def on_group(self, group: GroupRecord) -> GroupUse:
        """Record the group's accuracy, decide or propose; say what the group is."""
        variant, acc = group.variant, group.accuracy
        proposal = self.pending.get(variant.task_id)
        if proposal is not None and proposal.candidate.variant_id == variant.variant_id:
            return await self._decide(proposal, group)
        if variant.variant_id not in self._trainable:
            log.warning(
                "group %s of %s: neither a version of its task nor its pending "
                "candidate; not training data",
                group.group_id,
                variant.variant_id,
            )
            return "rejected"
        if group.empty:
            return "empty"
        self.accuracy[variant.variant_id] = acc
        if proposal is not None or variant.variant_id != self.current[variant.task_id].variant_id:
            return "original"
        direction = self.band.goal(acc)
        if direction is not None:
            await self._propose(group, direction)
        return "original"

    async def _propose(self, group: GroupRecord, direction: Direction) -> None:
        variant, acc = group.variant, group.accuracy
        template = self.templates[variant.task_id]
        summaries: list[str] = []
        if self.critic is not None and self.rewriter.reads_summaries(variant, template, direction):
            summaries = await self.critic.summarize_group(
                variant, list(group.trajectories), {k: list(v) for k, v in group.verdicts.items()}
            )
        # never again: a rejected candidate, nor the current or an earlier version
        known = self._rejected.get(variant.task_id, set()) | set(self._versions[variant.task_id])
        rewrite = await self.rewriter.propose(
            variant, template, summaries, direction, exclude=frozenset(known)
        )
        note = rewrite.note
        if rewrite.candidate is not None and variant_key(rewrite.candidate) in known:
            note = (
                f"rewrite {variant_key(rewrite.candidate)} equals a version or a rejected "
                f"candidate of the task; skipped ({note})"
            )
            rewrite = Rewrite(None, note)
        if rewrite.candidate is None:
            await self._event(
                "adapt_no_candidate", variant, direction=direction, acc=acc, note=note
            )
            return
        candidate = self._numbered(rewrite.candidate, template)
        self._ids.add(candidate.variant_id)
        self.pending[variant.task_id] = Proposal(candidate, variant, direction, acc, summaries)
        self._queue.append(candidate)
        await self.store.add_variant(candidate)
        await self.store.incr("adapt_proposals")
        await self._event(
            "adapt_proposal",
            variant,
            direction=direction,
            acc_parent=acc,
            candidate=candidate.variant_id,
            instruction=candidate.instruction,
            summaries=summaries,
            note=note,
        )

    async def _decide(self, proposal: Proposal, group: GroupRecord) -> GroupUse:
        """Accept or reject the candidate on its group (acc(q) is the parent's
        accuracy frozen at proposal). A group with no scored rollout is rejected
        with reason `no_rollouts`, so the task is free for a new proposal."""
        task_id = proposal.parent.task_id
        del self.pending[task_id]
        acc = group.accuracy
        reason = ""
        if group.empty:
            accepted, reason = False, "no_rollouts"
            await self.store.incr("adapt_no_rollouts")
        else:
            self.accuracy[proposal.candidate.variant_id] = acc
            accepted = self.band.accept(proposal.direction, proposal.acc_parent, acc)
        if accepted:
            self.current[task_id] = proposal.candidate
            self._trainable.add(proposal.candidate.variant_id)
            self._versions[task_id].append(variant_key(proposal.candidate))
            await self.store.incr("adapt_accepted")
        else:
            self._rejected.setdefault(task_id, set()).add(variant_key(proposal.candidate))
        await self._event(
            "adapt_decision",
            proposal.parent,
            accepted=accepted,
            direction=proposal.direction,
            parent=proposal.parent.variant_id,
            candidate=proposal.candidate.variant_id,
            acc_parent=proposal.acc_parent,
            acc_candidate=None if group.empty else acc,
            summaries=proposal.summaries,
            reason=reason,
            gave_up_reasons=list(group.gave_up_reasons),
        )
        if group.empty:
            return "empty"
        return "accepted" if accepted else "rejected"

    def _numbered(self, candidate: TaskVariant, template: TaskTemplate) -> TaskVariant:
        """Give the candidate an id never used in this run: a template's canonical
        instruction keeps revision 0 unless that id was handed out before; any other
        instruction gets the task's next revision."""
        canonical = template.variants[candidate.evaluator_name].instruction
        if (
            candidate.instruction == canonical
            and candidate.revision == 0
            and candidate.variant_id not in self._ids
        ):
            return candidate
        while True:
            rev = self._revisions.get(candidate.task_id, 0) + 1
            self._revisions[candidate.task_id] = rev
            numbered = TaskVariant(**{**asdict(candidate), "revision": rev})
            if numbered.variant_id not in self._ids:
                return numbered

    async def _event(self, kind: str, variant: TaskVariant, **data: Any) -> None:
        log.info("%s %s %s", kind, variant.variant_id, data)
        await self.store.add_event(kind, variant.task_id, data)

    # resume ------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        return {
            "current": {k: asdict(v) for k, v in self.current.items()},
            "pending": {
                k: {**asdict(p), "candidate": asdict(p.candidate), "parent": asdict(p.parent)}
                for k, p in self.pending.items()
            },
            "queue": [asdict(v) for v in self._queue],
            "accuracy": dict(self.accuracy),
            "turn": self._turn,
            "revisions": dict(self._revisions),
            "trainable": sorted(self._trainable),
            "rejected": {k: sorted(v) for k, v in self._rejected.items()},
            "versions": {k: list(v) for k, v in self._versions.items()},
            "ids": sorted(self._ids),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.current = {k: _variant(v) for k, v in state["current"].items()}
        self.pending = {
            k: Proposal(
                **{**p, "candidate": _variant(p["candidate"]), "parent": _variant(p["parent"])}
            )
            for k, p in state["pending"].items()
        }
        self._queue = deque(_variant(v) for v in state["queue"])
        self.accuracy = dict(state["accuracy"])
        self._turn = state["turn"]
        self._revisions = dict(state["revisions"])
        self._trainable = set(state.get("trainable", [v.variant_id for v in self.current.values()]))
        self._rejected = {k: {(n, i) for n, i in v} for k, v in state.get("rejected", {}).items()}
        self._versions = {
            k: [(n, i) for n, i in v]
            for k, v in state.get(
                "versions", {k: [variant_key(v)] for k, v in self.current.items()}
            ).items()
        }
        self._ids = (
            set(state.get("ids", ()))
            | self._trainable
            | {p.candidate.variant_id for p in self.pending.values()}
        )
        # A candidate handed out before a crash has no group coming: serve it again.
        queued = {v.variant_id for v in self._queue}
        for proposal in self.pending.values():
            if proposal.candidate.variant_id not in queued:
                self._queue.append(proposal.candidate)


def _variant(data: dict[str, Any]) -> TaskVariant:
    return TaskVariant(
        **{**data, "config": tuple(data["config"]), "related_apps": tuple(data["related_apps"])}
    )
