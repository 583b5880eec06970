"""The tiles miniature on a local desktop: a scripted policy lights the tiles with
a miss and a repeat in between, and the step labels its progress probe writes are
exactly the steps that lit a tile; the outcome is the hardest variant's."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests_support.fake_answers import script, tool_call
from tests_support.fake_model_server import FakeModelConfig, FakeModelServer

from cua_rl.config import RunConfig, load_config
from cua_rl.runtime.rollout_run import run_rollouts
from cua_rl.store.run_store import RunStore
from cua_rl.store.step_labels import read_step_labels

TILES_ROWS = "07cc2b19-4a73-5b41-b641-4dd704cb4040"
"""Three tiles in rows on the right half: x 0.52-0.98, y 0.04-0.30 / 0.37-0.63 / 0.70-0.96."""

SCRIPT = [
    tool_call("left_click", coordinate=[750, 170]),  # lights the top tile: +1
    tool_call("left_click", coordinate=[200, 500]),  # the grey left half: -1
    tool_call("left_click", coordinate=[760, 180]),  # the top tile again: -1
    tool_call("left_click", coordinate=[750, 500]),  # the middle tile: +1
    tool_call("type", text="done"),  # no click: -1
    tool_call("left_click", coordinate=[750, 830]),  # the bottom tile: +1
    tool_call("terminate", status="success"),  # ends the episode: -1
]
EXPECTED = [1, -1, -1, 1, -1, 1, -1]


def test_step_labels_are_the_steps_that_lit_a_tile(tmp_path: Path, local_desktops: None) -> None:
    async def run() -> None:
        policy = FakeModelServer(FakeModelConfig(answer=script(SCRIPT)))
        url = await policy.start()
        try:
            cfg = load_config(
                RunConfig,
                preset="miniature",
                overrides=[
                    f"tasks.ids=[{TILES_ROWS}]",
                    f"policy.urls=[{url}]",
                    "judge.enabled=false",
                    "desktops.count=1",
                    "fleet.actors=1",
                    "fleet.group_size=1",
                    "fleet.max_groups=1",
                    f"episode.max_steps={len(SCRIPT) + 1}",
                    f"desktops.provider.state_dir={tmp_path / 'state'}",
                ],
            )
            await run_rollouts(cfg, tmp_path / "run")
        finally:
            await policy.stop()

    asyncio.run(run())
    store = RunStore.read_only(tmp_path / "run")
    try:
        (record,) = store.trajectory_records()
        labels = read_step_labels(store)
    finally:
        store.close()
    assert record["status"] == "finished" and record["n_steps"] == len(SCRIPT)
    assert record["score"] == 1.0  # all three tiles lit: the original variant, light_all
    assert labels.rejected == []
    stored = labels.by_trajectory[record["trajectory_id"]]
    assert list(stored.labels) == EXPECTED
    assert stored.source.startswith("task progress probe")
