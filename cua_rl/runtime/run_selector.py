"""The task source of a training run: the template selector (Algorithm 2) over the
run's task set, with the rewriter it proposes variants with (the rules, or a model on
its own frozen pool, `rewriter_pool`) and the critic, resumed from its checkpoint
(`make_selector`).

It is apart from runtime/train.py, which wires the selector into the loop beside the
fleet and the learners: building the selector only reads the config, the task set and
the checkpoint, the same on every runtime (local, or Ray's driver).
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from cua_rl.adapt.config import RewriterConfig
from cua_rl.adapt.critique import Critic
from cua_rl.adapt.rewriter import TaskTemplate, load_difficulty, make_rewriter
from cua_rl.adapt.selector import TemplateSelector
from cua_rl.config import RunConfig
from cua_rl.config.roles import run_roles
from cua_rl.inference.config import ModelServersConfig
from cua_rl.inference.pool import InferencePool
from cua_rl.inference.replica_set import ReplicaSet
from cua_rl.seeds import derive_seed
from cua_rl.store.async_run_store import AsyncRunStore
from cua_rl.tasks.sources import difficulty_file
from cua_rl.types import TaskVariant

log = logging.getLogger(__name__)

PoolStarter = Callable[
    [ModelServersConfig, str], contextlib.AbstractAsyncContextManager[ReplicaSet]
]
"""Starts one more model pool (the rewriter's) where the runtime places replicas."""


def task_templates(
    cfg: RunConfig, task_set: list[list[TaskVariant]]
) -> tuple[dict[str, TaskTemplate], dict[str, TaskVariant]]:
    """Each task's template (its variants in the task source's difficulty order) and
    the variant Algorithm 2 starts it from."""
    # the order of the task source's own pairs (a pair folder's difficulty.json)
    path = cfg.adapt.difficulty or difficulty_file(cfg.tasks.source, cfg.tasks.templates_root)
    difficulty = load_difficulty(path)
    templates, start = {}, {}
    for variants in task_set:
        template = TaskTemplate.from_variants(variants, difficulty.get(variants[0].task_id))
        templates[variants[0].task_id] = template
        # Algorithm 2 starts from the original task (`load_variants` puts it first)
        start[variants[0].task_id] = variants[0]
    return templates, start


@contextlib.asynccontextmanager
async def rewriter_pool(
    cfg: RunConfig, start_pool: PoolStarter
) -> AsyncIterator[InferencePool | None]:
    """The model rewriter's own frozen pool (Algorithm 2's rewriting LLM is a fixed
    model, not the reward model being trained); None for the rule rewriter."""
    rewriter = cfg.adapt.rewriter
    if not run_roles(cfg).rewriter_replicas:
        yield None
        return
    async with start_pool(rewriter.pool, "rewriter") as replicas:
        pool = InferencePool(replicas, rewriter.pool.requests)
        try:
            yield pool
        finally:
            await pool.close()


def make_selector(
    cfg: RunConfig,
    task_set: list[list[TaskVariant]],
    *,
    store: AsyncRunStore,
    prm: InferencePool | None,
    rewriter_model: InferencePool | None,
    selector_file: Path,
    resume: bool,
) -> TemplateSelector:
    """The run's selector over `task_set`; resuming, with the state in `selector_file`."""
    templates, start = task_templates(cfg, task_set)
    # Without adaptation the selector only serves tasks: its rewriter is never asked.
    rewriter = make_rewriter(
        cfg.adapt.rewriter if cfg.adapt.enabled else RewriterConfig(),
        rewriter_model,
        seed=derive_seed(cfg.seed, "rewriter"),
    )
    if cfg.adapt.enabled and cfg.adapt.rewriter.type == "rules":
        fixed = sorted(t for t, tpl in templates.items() if not tpl.adaptable_by_rules)
        if fixed:
            log.warning(
                "%d of %d tasks have one variant and no hints: the rule rewriter "
                "cannot adapt them (adapt.rewriter.type=model can): %s",
                len(fixed),
                len(templates),
                ", ".join(fixed[:5]),
            )
    critic = (
        Critic(prm, cfg.adapt.critique, seed=derive_seed(cfg.seed, "critic"))
        if prm is not None
        else None
    )
    selector = TemplateSelector(
        templates, start, band=cfg.adapt.band, rewriter=rewriter, store=store, critic=critic
    )
    if resume and selector_file.is_file():
        selector.load_state_dict(json.loads(selector_file.read_text()))
    return selector
