"""Rewriters turn a task variant into an easier or harder one of the SAME task.

A rewriter may only pick one of the task's template names (pre-built evaluator
variants) and write its instruction: it never invents a new task, because a new
task would have no evaluator. `ModelRewriter` asks an LLM (k samples, first
valid kept); `RuleRewriter` needs no model: it walks the variants in their
recorded difficulty order and adds or removes recorded hint lines.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from cua_rl.adapt.acceptance import Direction
from cua_rl.agent.messages import parse_rewrite, rewrite_messages
from cua_rl.errors import InferenceError, TaskFormatError
from cua_rl.rollout.base import ChatBackend
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
                f"{sorted(hints)}")
        return cls(by_name, list(order), {k: list(v) for k, v in hints.items()})

    @property
    def instructions(self) -> dict[str, str]:
        return {name: v.instruction for name, v in self.variants.items()}

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


class Rewriter(Protocol):
    counts: Counter[str]

    async def propose(self, current: TaskVariant, template: TaskTemplate,
                      summaries: list[str], direction: Direction) -> TaskVariant | None: ...


class RewriterConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["model", "rules"] = "rules"
    """`model`: an LLM writes the instruction; `rules`: recorded variants and hints."""
    candidates: int = Field(3, ge=1, le=16)
    """k: answers sampled from the model; the first valid one is kept."""
    temperature: float = Field(1.0, ge=0.0)
    max_tokens: int = Field(512, ge=1)


class ModelRewriter:
    def __init__(self, model: ChatBackend, cfg: RewriterConfig) -> None:
        self.model = model
        self.cfg = cfg
        self.counts: Counter[str] = Counter()

    async def propose(self, current: TaskVariant, template: TaskTemplate,
                      summaries: list[str], direction: Direction) -> TaskVariant | None:
        messages = rewrite_messages(current.instruction, template.instructions, summaries,
                                    direction)
        try:
            result = await self.model.chat(messages, n=self.cfg.candidates,
                                           temperature=self.cfg.temperature,
                                           max_tokens=self.cfg.max_tokens)
        except InferenceError:
            self.counts["rewrite_failures"] += 1
            return None
        for choice in result.choices:
            parsed = parse_rewrite(choice.text, list(template.variants))
            if parsed is None:
                self.counts["rewrite_invalid"] += 1
                continue
            name, instruction = parsed
            if (name, instruction) == (current.evaluator_name, current.instruction):
                self.counts["rewrite_unchanged"] += 1
                continue
            return template.make(name, instruction)
        return None


class RuleRewriter:
    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    async def propose(self, current: TaskVariant, template: TaskTemplate,
                      summaries: list[str], direction: Direction) -> TaskVariant | None:
        name = current.evaluator_name
        canonical = template.variants[name].instruction
        added = _added_hints(current.instruction, canonical, template.hints.get(name, []))
        rank = template.order.index(name)
        if direction == "easier":
            remaining = [h for h in template.hints.get(name, []) if h not in added]
            if remaining:
                return template.make(name, _with_hints(canonical, [*added, remaining[0]]))
            if rank > 0:
                return template.variants[template.order[rank - 1]]
            return None
        if added:
            return template.make(name, _with_hints(canonical, added[:-1]))
        if rank + 1 < len(template.order):
            return template.variants[template.order[rank + 1]]
        return None


def _with_hints(canonical: str, hints: list[str]) -> str:
    return "\n".join([canonical, *hints]) if hints else canonical


def _added_hints(instruction: str, canonical: str, hints: list[str]) -> list[str]:
    if not instruction.startswith(canonical):
        return []
    lines = instruction[len(canonical):].strip("\n").splitlines()
    return [line for line in lines if line in hints]


def make_rewriter(cfg: RewriterConfig, model: ChatBackend | None) -> Rewriter:
    if cfg.type == "model":
        if model is None:
            raise TaskFormatError("rewriter type `model` needs a model pool")
        return ModelRewriter(model, cfg)
    return RuleRewriter()
