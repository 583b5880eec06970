"""Rewriters turn a task variant into an easier or harder one of the SAME task.

A rewriter may only pick one of the task's template names (pre-built evaluator
variants) and write its instruction: it never invents a new task, because a new
task would have no evaluator. `ModelRewriter` asks a fixed LLM of its own pool
(k samples, first valid kept; the paper's Qwen3-4B, never the reward model being
trained); `RuleRewriter` needs no model: it walks the variants in their recorded
difficulty order and adds or removes recorded hint lines, using the critique to
choose which hint to add where there is a choice. A task with one variant and no
recorded hints cannot be adapted by rules: the model rewriter is the path for it.

Every proposal comes with a note saying how it was chosen (or why there is
none); the selector records it with the proposal. A candidate that was rejected
before is never proposed again (`exclude`).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from cua_rl.adapt.acceptance import Direction
from cua_rl.adapt.config import RewriterConfig
from cua_rl.agent.messages import parse_rewrite, rewrite_messages
from cua_rl.errors import InferenceError, TaskFormatError
from cua_rl.inference.base import ChatBackend
from cua_rl.seeds import SeedSequence
from cua_rl.types import TaskVariant


@dataclass
class TaskTemplate:
    """A task's variants: evaluator name -> canonical instruction and spec."""

    variants: dict[str, TaskVariant]
    order: list[str]
    """Evaluator names from easiest to hardest."""
    hints: dict[str, list[str]] = field(default_factory=dict)
    """Hint lines per evaluator name, in the order they are added."""

    @classmethod
    def from_variants(cls, variants: list[TaskVariant], entry: Any = None) -> TaskTemplate:
        by_name = {v.evaluator_name: v for v in variants}
        order, hints = list(by_name), {}
        if isinstance(entry, list):
            order = entry
        elif isinstance(entry, dict):
            order, hints = entry.get("order", order), entry.get("hints", {})
        unknown = [n for n in [*order, *hints] if n not in by_name]
        if unknown or sorted(order) != sorted(by_name):
            raise TaskFormatError(
                f"difficulty entry of task {variants[0].task_id}: expected an order of exactly "
                f"the template names {sorted(by_name)}, got order {order} and hints for "
                f"{sorted(hints)}"
            )
        return cls(by_name, list(order), {k: list(v) for k, v in hints.items()})

    @property
    def instructions(self) -> dict[str, str]:
        return {name: v.instruction for name, v in self.variants.items()}

    @property
    def adaptable_by_rules(self) -> bool:
        """Whether the rule rewriter has anything to work with (variants or hints)."""
        return len(self.variants) > 1 or any(self.hints.values())

    def make(self, name: str, instruction: str) -> TaskVariant:
        return replace(self.variants[name], instruction=instruction)


def load_difficulty(path: Path | None) -> dict[str, Any]:
    """`{task_id: [names easiest->hardest]}` or `{task_id: {order, hints}}`."""
    if path is None or not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except ValueError as exc:
        raise TaskFormatError(f"{path}: not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise TaskFormatError(f"{path}: $: expected an object of task id -> difficulty order")
    return data


Key = tuple[str, str]
"""(evaluator name, instruction): what makes two variants of a task the same."""


def variant_key(variant: TaskVariant) -> Key:
    return variant.evaluator_name, variant.instruction


@dataclass(frozen=True, slots=True)
class Rewrite:
    """A rewriter's answer: the candidate (None: no proposal) and how it was chosen."""

    candidate: TaskVariant | None
    note: str


class Rewriter(Protocol):
    counts: Counter[str]

    def reads_summaries(
        self, current: TaskVariant, template: TaskTemplate, direction: Direction
    ) -> bool:
        """Whether critique summaries would change the proposal (they cost reward-model
        calls, so the selector asks for them only then)."""
        ...

    async def propose(
        self,
        current: TaskVariant,
        template: TaskTemplate,
        summaries: list[str],
        direction: Direction,
        exclude: frozenset[Key] = frozenset(),
    ) -> Rewrite: ...


class ModelRewriter:
    def __init__(self, model: ChatBackend, cfg: RewriterConfig, seed: int | None = None) -> None:
        self.model = model
        self.cfg = cfg
        self.counts: Counter[str] = Counter()
        self._seeds = SeedSequence(seed, "rewrite")
        """Request seeds from the run's `seed` (None: unseeded)."""

    def reads_summaries(
        self, current: TaskVariant, template: TaskTemplate, direction: Direction
    ) -> bool:
        return True

    async def propose(
        self,
        current: TaskVariant,
        template: TaskTemplate,
        summaries: list[str],
        direction: Direction,
        exclude: frozenset[Key] = frozenset(),
    ) -> Rewrite:
        messages = rewrite_messages(
            current.instruction,
            template.instructions,
            summaries,
            direction,
            evaluator=current.evaluator_name,
        )
        try:
            result = await self.model.chat(
                messages,
                n=self.cfg.candidates,
                temperature=self.cfg.temperature,
                max_tokens=self.cfg.max_tokens,
                seed=self._seeds.next(),
            )
        except InferenceError as exc:
            self.counts["rewrite_failures"] += 1
            return Rewrite(None, f"rewriter model failed: {exc}")
        for choice in result.choices:
            parsed = parse_rewrite(choice.text, list(template.variants))
            if parsed is None:
                self.counts["rewrite_invalid"] += 1
                continue
            if parsed == variant_key(current):
                self.counts["rewrite_unchanged"] += 1
                continue
            if parsed in exclude:
                self.counts["rewrite_rejected_before"] += 1
                continue
            return Rewrite(template.make(*parsed), f"model answer ({len(summaries)} summaries)")
        return Rewrite(None, f"no valid new rewrite among {len(result.choices)} model answers")


class RuleRewriter:
    """Recorded variants and hints, walked in difficulty order."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def reads_summaries(
        self, current: TaskVariant, template: TaskTemplate, direction: Direction
    ) -> bool:
        # Only when going easier with a choice of hints to add.
        return direction == "easier" and len(_remaining_hints(current, template)) > 1

    async def propose(
        self,
        current: TaskVariant,
        template: TaskTemplate,
        summaries: list[str],
        direction: Direction,
        exclude: frozenset[Key] = frozenset(),
    ) -> Rewrite:
        if not template.adaptable_by_rules:
            return Rewrite(
                None,
                "one variant and no recorded hints: rules cannot adapt this "
                "task (adapt.rewriter.type=model can)",
            )
        options = (
            self._easier(current, template, summaries)
            if direction == "easier"
            else self._harder(current, template)
        )
        seen = exclude | {variant_key(current)}
        for candidate, note in options:
            if variant_key(candidate) not in seen:
                return Rewrite(candidate, note)
        return Rewrite(None, f"no {direction} variant or hint left that was not rejected before")

    def _easier(
        self, current: TaskVariant, template: TaskTemplate, summaries: list[str]
    ) -> list[tuple[TaskVariant, str]]:
        """Add one hint (the one closest to the critique's failure modes), else go
        down the difficulty order."""
        name = current.evaluator_name
        canonical = template.variants[name].instruction
        added = _added_hints(current.instruction, canonical, template.hints.get(name, []))
        remaining = _remaining_hints(current, template)
        ranked = sorted(remaining, key=lambda h: -_overlap(h, summaries))  # stable on ties
        options = []
        for hint in ranked:
            why = (
                f"hint closest to the critique (overlap {_overlap(hint, summaries):.2f})"
                if summaries and len(remaining) > 1
                else "next recorded hint"
            )
            options.append((template.make(name, _with_hints(canonical, [*added, hint])), why))
        rank = template.order.index(name)
        options += [
            (
                template.variants[n],
                "easier variant in the difficulty order (the critique cannot rank variants)",
            )
            for n in reversed(template.order[:rank])
        ]
        return options

    def _harder(
        self, current: TaskVariant, template: TaskTemplate
    ) -> list[tuple[TaskVariant, str]]:
        """Remove the last added hint, else go up the difficulty order."""
        name = current.evaluator_name
        canonical = template.variants[name].instruction
        added = _added_hints(current.instruction, canonical, template.hints.get(name, []))
        options = []
        if added:
            options.append(
                (template.make(name, _with_hints(canonical, added[:-1])), "last added hint removed")
            )
        rank = template.order.index(name)
        options += [
            (template.variants[n], "harder variant in the difficulty order")
            for n in template.order[rank + 1 :]
        ]
        return options


def _remaining_hints(current: TaskVariant, template: TaskTemplate) -> list[str]:
    name = current.evaluator_name
    hints = template.hints.get(name, [])
    added = _added_hints(current.instruction, template.variants[name].instruction, hints)
    return [h for h in hints if h not in added]


_WORD = re.compile(r"[a-z0-9]+")


def _overlap(hint: str, summaries: list[str]) -> float:
    """Share of a hint's words (longer than 3 letters) that the summaries mention."""
    words = {w for w in _WORD.findall(hint.lower()) if len(w) > 3}
    said = {w for s in summaries for w in _WORD.findall(s.lower())}
    return len(words & said) / len(words) if words else 0.0


def _with_hints(canonical: str, hints: list[str]) -> str:
    return "\n".join([canonical, *hints]) if hints else canonical


def _added_hints(instruction: str, canonical: str, hints: list[str]) -> list[str]:
    if not instruction.startswith(canonical):
        return []
    lines = instruction[len(canonical) :].strip("\n").splitlines()
    return [line for line in lines if line in hints]


def make_rewriter(
    cfg: RewriterConfig, model: ChatBackend | None, seed: int | None = None
) -> Rewriter:
    """The configured rewriter; `seed` (the run's) seeds a model rewriter's requests."""
    if cfg.type == "model":
        if model is None:
            raise TaskFormatError("rewriter type `model` needs a model pool")
        return ModelRewriter(model, cfg, seed)
    return RuleRewriter()
