"""Task adaptation end to end on a real local desktop with the tiny policy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests_support.fake_answers import REWRITE_MARK, TRAJ_SUMMARY, by_role
from tests_support.fake_model_server import FakeModelConfig, FakeModelServer

from cua_rl.adapt.acceptance import AdaptBand
from cua_rl.adapt.config import RewriterConfig
from cua_rl.adapt.critique import Critic
from cua_rl.adapt.rewriter import ModelRewriter, TaskTemplate
from cua_rl.adapt.selector import TemplateSelector
from cua_rl.config import RunConfig
from cua_rl.rollout.fleet import Fleet
from cua_rl.rollout.scheduler import GroupScheduler
from cua_rl.runtime.local import local_components
from cua_rl.store.run_store import RunStore

pytestmark = [pytest.mark.desktop, pytest.mark.model]

TASK = {
    "id": "t-hello",
    "snapshot": "os",
    "source": "test",
    "related_apps": ["os"],
    "instruction": "Create an empty file named hello.txt in the home folder.",
    "config": [],
    "evaluator": {"func": "infeasible"},
}
CHECK = {
    "func": "exact_match",
    "result": {
        "type": "vm_command_line",
        "shell": True,
        "command": "test -f /home/user/hello.txt && echo yes || echo no",
    },
    "expected": {"type": "rule", "rules": {"expected": "yes\n"}},
}


def _write_task(root: Path) -> None:
    (root / "osworld" / "examples" / "os").mkdir(parents=True)
    (root / "osworld" / "examples" / "os" / "t-hello.json").write_text(json.dumps(TASK))
    (root / "pairs" / "templates").mkdir(parents=True)
    (root / "pairs" / "evaluators" / "t-hello").mkdir(parents=True)
    (root / "pairs" / "templates" / "t-hello.json").write_text(
        json.dumps(
            {
                "home": "Create an empty file named hello.txt in the home folder.",
                "home_and_desktop": "Create hello.txt in the home folder and in ~/Desktop.",
            }
        )
    )
    for name in ("home", "home_and_desktop"):
        (root / "pairs" / "evaluators" / "t-hello" / f"{name}.json").write_text(json.dumps(CHECK))


async def test_failing_task_gets_easier_proposal_and_rule_decides(
    tmp_path: Path, tiny_model_dir: Path, local_desktops: None
) -> None:
    _write_task(tmp_path)
    scripted = FakeModelServer(FakeModelConfig(answer=by_role(["home"])))
    url = await scripted.start()
    cfg = RunConfig.model_validate(
        {
            "tasks": {
                "source": f"osworld:{tmp_path / 'osworld'}",
                "templates_root": str(tmp_path / "pairs"),
            },
            "desktops": {"count": 1, "provider": {"state_dir": str(tmp_path / "state")}},
            "prm": {"urls": [url]},
            "fleet": {"actors": 1, "group_size": 2},
            "episode": {"max_steps": 2, "max_tokens": 16},
            "tiny_model_dir": str(tiny_model_dir),
        }
    )
    try:
        async with local_components(cfg, tmp_path / "run") as parts:
            variants = parts.task_set[0]
            template = TaskTemplate.from_variants(variants, ["home", "home_and_desktop"])
            start = template.variants["home_and_desktop"]  # the tiny policy fails it: acc 0
            selector = TemplateSelector(
                {"t-hello": template},
                {"t-hello": start},
                band=AdaptBand(),
                rewriter=ModelRewriter(parts.prm, RewriterConfig(type="model")),
                critic=Critic(parts.prm),
                store=parts.store,
            )
            decided = False

            async def source():
                return None if decided else await selector.next_variant()

            async def on_group(group):
                nonlocal decided
                await selector.on_group(group)
                decided = decided or any(
                    e["kind"] == "adapt_decision" for e in await parts.store.events()
                )

            fleet = Fleet(
                GroupScheduler(source, 2, max_groups=6),
                parts.desktops,
                parts.policy,
                parts.store,
                cfg.episode,
                cfg.fleet,
                judge=parts.judge,
                on_group=on_group,
            )
            await fleet.run()
    finally:
        await scripted.stop()
    store = RunStore(tmp_path / "run")
    proposals = store.events("adapt_proposal")
    proposal = proposals[0]  # a group of q opened before the decision may propose again
    assert proposal["data"]["direction"] == "easier" and proposal["data"]["acc_parent"] == 0.0
    assert TRAJ_SUMMARY.strip("\\boxed{}") in proposal["data"]["summaries"][0]
    rewrite_prompts = [json.dumps(m) for m in scripted.messages if REWRITE_MARK in json.dumps(m)]
    assert rewrite_prompts and "repeatedly targets the wrong window" in rewrite_prompts[0]
    decision = store.events("adapt_decision")[0]
    sampled = {
        r["trajectory_id"]: r["variant_id"]
        for r in store.trajectory_records()
        if r["status"] not in ("aborted", "setup_failed")
    }
    assert decision["data"]["candidate"] in sampled.values()  # the proposal was sampled
    acc_candidate = decision["data"]["acc_candidate"]
    assert decision["data"]["accepted"] is (0.0 < acc_candidate < 0.8)
    summary = store.summary()
    assert summary["adapt_proposals"] == len(proposals)
    assert summary["adapt_accepted"] == sum(
        d["data"]["accepted"] for d in store.events("adapt_decision")
    )
