"""The template selector: the task source of a training run, and the place where
task groups turn into adaptation decisions.

It hands out each task's current variant round-robin. After a task group: a
group of a pending candidate q' is judged against its parent (accepted q'
replaces q, with its history kept); a group of a current variant whose accuracy
is outside the band gets a proposal, which joins the next sampling round as a
temporary task. A task has at most one pending candidate. Every proposal and
decision is an event in the run store, and `state_dict` captures everything a
resumed run needs.

Only groups of original and accepted tasks are training data: `on_group` says
so for each group (a candidate's group decides its acceptance and nothing else).
A rejected candidate is remembered and never proposed again for its task; the
critique is asked for only when the rewriter would read it.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any

from cua_rl.adapt.acceptance import AdaptBand, Direction
from cua_rl.adapt.critique import Critic
from cua_rl.adapt.rewriter import Key, Rewriter, TaskTemplate, variant_key
from cua_rl.store.run_store import AsyncRunStore
from cua_rl.types import GroupRecord, TaskVariant

log = logging.getLogger(__name__)


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

    # decisions ---------------------------------------------------------------

    async def on_group(self, group: GroupRecord) -> bool:
        """Record the group's accuracy, decide or propose; True when the group is
        training data (its variant is an original or accepted task)."""
        variant, acc = group.variant, group.accuracy
        trainable = variant.variant_id in self._trainable
        self.accuracy[variant.variant_id] = acc
        proposal = self.pending.get(variant.task_id)
        if proposal is not None and proposal.candidate.variant_id == variant.variant_id:
            await self._decide(proposal, acc)
            return False  # sampled as a candidate: it decides acceptance, nothing more
        if proposal is not None or variant.variant_id != self.current[variant.task_id].variant_id:
            return trainable
        direction = self.band.goal(acc)
        if direction is None:
            return trainable
        template = self.templates[variant.task_id]
        summaries: list[str] = []
        if self.critic is not None and self.rewriter.reads_summaries(variant, template,
                                                                     direction):
            summaries = await self.critic.summarize_group(
                variant, list(group.trajectories), {k: list(v) for k, v in group.verdicts.items()})
        rejected = frozenset(self._rejected.get(variant.task_id, ()))
        rewrite = await self.rewriter.propose(variant, template, summaries, direction,
                                              exclude=rejected)
        if rewrite.candidate is None:
            await self._event("adapt_no_candidate", variant, direction=direction, acc=acc,
                              note=rewrite.note)
            return trainable
        candidate = rewrite.candidate
        candidate = self._numbered(candidate, template)
        self.pending[variant.task_id] = Proposal(candidate, variant, direction, acc, summaries)
        self._queue.append(candidate)
        await self.store.add_variant(candidate)
        await self.store.incr("adapt_proposals")
        await self._event("adapt_proposal", variant, direction=direction, acc_parent=acc,
                          candidate=candidate.variant_id, instruction=candidate.instruction,
                          summaries=summaries, note=rewrite.note)
        return trainable

    async def _decide(self, proposal: Proposal, acc: float) -> None:
        task_id = proposal.parent.task_id
        accepted = self.band.accept(proposal.direction, proposal.acc_parent, acc)
        del self.pending[task_id]
        if accepted:
            self.current[task_id] = proposal.candidate
            self._trainable.add(proposal.candidate.variant_id)
            await self.store.incr("adapt_accepted")
        else:
            self._rejected.setdefault(task_id, set()).add(variant_key(proposal.candidate))
        await self._event(
            "adapt_decision", proposal.parent, accepted=accepted, direction=proposal.direction,
            parent=proposal.parent.variant_id, candidate=proposal.candidate.variant_id,
            acc_parent=proposal.acc_parent, acc_candidate=acc, summaries=proposal.summaries,
        )

    def _numbered(self, candidate: TaskVariant, template: TaskTemplate) -> TaskVariant:
        """Give a rewritten instruction of an existing evaluator its own revision."""
        canonical = template.variants[candidate.evaluator_name].instruction
        if candidate.instruction == canonical:
            return candidate
        rev = self._revisions.get(candidate.task_id, 0) + 1
        self._revisions[candidate.task_id] = rev
        return TaskVariant(**{**asdict(candidate), "revision": rev})

    async def _event(self, kind: str, variant: TaskVariant, **data: Any) -> None:
        log.info("%s %s %s", kind, variant.variant_id, data)
        await self.store.add_event(kind, variant.task_id, data)

    # resume ------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        return {
            "current": {k: asdict(v) for k, v in self.current.items()},
            "pending": {k: {**asdict(p), "candidate": asdict(p.candidate),
                            "parent": asdict(p.parent)} for k, p in self.pending.items()},
            "queue": [asdict(v) for v in self._queue],
            "accuracy": dict(self.accuracy),
            "turn": self._turn,
            "revisions": dict(self._revisions),
            "trainable": sorted(self._trainable),
            "rejected": {k: sorted(v) for k, v in self._rejected.items()},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.current = {k: _variant(v) for k, v in state["current"].items()}
        self.pending = {
            k: Proposal(**{**p, "candidate": _variant(p["candidate"]),
                           "parent": _variant(p["parent"])})
            for k, p in state["pending"].items()
        }
        self._queue = deque(_variant(v) for v in state["queue"])
        self.accuracy = dict(state["accuracy"])
        self._turn = state["turn"]
        self._revisions = dict(state["revisions"])
        self._trainable = set(state.get("trainable", [v.variant_id
                                                       for v in self.current.values()]))
        self._rejected = {k: {(n, i) for n, i in v}
                          for k, v in state.get("rejected", {}).items()}


def _variant(data: dict[str, Any]) -> TaskVariant:
    return TaskVariant(**{**data, "config": tuple(data["config"]),
                          "related_apps": tuple(data["related_apps"])})
