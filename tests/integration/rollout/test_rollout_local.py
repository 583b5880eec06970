"""The fleet on real local desktops with the tiny model served by hf replicas."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from cua_rl.config import RunConfig
from cua_rl.inference.base import ChatResult
from cua_rl.rollout.fleet import Fleet
from cua_rl.rollout.scheduler import GroupScheduler
from cua_rl.runtime.local import local_components, task_cycle
from cua_rl.runtime.rollout_run import run_rollouts
from cua_rl.store.run_store import RunStore
from cua_rl.types import GroupRecord

pytestmark = [pytest.mark.desktop, pytest.mark.model]

TASK = {
    "id": "t-hello",
    "snapshot": "os",
    "source": "test",
    "related_apps": ["os"],
    "instruction": "Create an empty file named hello.txt in the home folder.",
    "config": [
        {"type": "execute", "parameters": {"command": ["bash", "-c", "rm -f /home/user/hello.txt"]}}
    ],
    "evaluator": {
        "func": "exact_match",
        "result": {
            "type": "vm_command_line",
            "shell": True,
            "command": "test -f /home/user/hello.txt && echo yes || echo no",
        },
        "expected": {"type": "rule", "rules": {"expected": "yes\n"}},
    },
}


@pytest.fixture
def run_config(tmp_path: Path, tiny_model_dir: Path, local_desktops: None) -> RunConfig:
    tasks = tmp_path / "osworld" / "examples" / "os"
    tasks.mkdir(parents=True)
    (tasks / "t-hello.json").write_text(json.dumps(TASK))
    return RunConfig.model_validate(
        {
            "tasks": {"source": f"osworld:{tmp_path / 'osworld'}"},
            "desktops": {"count": 1, "provider": {"state_dir": str(tmp_path / "state")}},
            "fleet": {"actors": 1, "group_size": 2},
            "episode": {"max_steps": 2, "max_tokens": 24},
            "judge": {"votes": 3, "max_tokens": 24},
            "tiny_model_dir": str(tiny_model_dir),
        }
    )


async def test_rollout_stores_steps_verdicts_and_outcomes(
    run_config: RunConfig, tmp_path: Path
) -> None:
    counts = await run_rollouts(run_config, tmp_path / "run")
    assert counts["groups"] == 1 and counts["episodes"] == 2
    store = RunStore(tmp_path / "run")
    summary = store.summary()
    assert summary["trajectories"] == 2 and summary["aborted"] == 0
    assert summary["steps"] == counts["steps"] >= 2
    for record in store.trajectory_records():
        if record["status"] in ("aborted", "setup_failed"):
            continue
        tid = record["trajectory_id"]
        traj = store.load_trajectory(tid)
        assert traj.score == 0.0 and traj.outcome == -1  # the tiny model does not solve tasks
        verdicts = store.load_verdicts(tid)
        assert [v.step_index for v in verdicts] == [s.index for s in traj.steps]
        assert all(len(v.votes) == 3 for v in verdicts)  # m votes per step
        for step in traj.steps:
            assert store.screenshot_path(step.screenshot_before).is_file()
            assert len(step.token_ids) == len(step.logprobs) > 0


class KillDesktopOnFirstCall:
    """Wraps the real policy pool: kills the leased desktop's session the first
    time the policy is asked, i.e. in the middle of the first episode."""

    def __init__(self, inner: Any, kill: Any) -> None:
        self.inner, self.kill, self.killed = inner, kill, False

    async def chat(self, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResult:
        if not self.killed:
            self.killed = True
            self.kill()
        return await self.inner.chat(messages, **kwargs)

    def end_session(self, key: str) -> None:
        self.inner.end_session(key)


async def test_desktop_killed_mid_episode_aborts_and_requeues(
    run_config: RunConfig, tmp_path: Path
) -> None:
    run_config.fleet.group_size = 1
    groups: list[GroupRecord] = []

    async def on_group(group: GroupRecord) -> None:
        groups.append(group)

    async with local_components(run_config, tmp_path / "run") as parts:
        (state_file,) = run_config.desktops.provider.state_dir.glob("*/state.json")

        def kill_session() -> None:  # read at kill time: a reset restarts the session
            os.killpg(json.loads(state_file.read_text())["pgid"], signal.SIGKILL)

        policy = KillDesktopOnFirstCall(parts.policy, kill_session)
        scheduler = GroupScheduler(task_cycle([parts.task_set[0][0]], None), 1)
        fleet = Fleet(
            scheduler,
            parts.desktops,
            policy,
            parts.store,
            run_config.episode,
            run_config.fleet,
            judge=parts.judge,
            on_group=on_group,
        )
        counts = await fleet.run()
        replacements = parts.pool.replacements
    assert policy.killed
    assert counts["aborted"] == 1 and counts["requeued"] == 1 and counts["episodes"] == 1
    assert replacements == 1
    assert len(groups) == 1 and len(groups[0].trajectories) == 1
    summary = RunStore(tmp_path / "run").summary()
    assert summary["aborted"] == 1 and summary["trajectories"] == 1
