"""The Gymnasium environments on real local desktops (issue: desktops as a Gym env).

One process-wide hub keeps desktops between environments, so this module starts
two desktops in all (check_env's render check needs a second one while the
first is leased, and the vector test reuses both); they are stopped at the end.
"""

from __future__ import annotations

import asyncio
import json
import warnings
from collections.abc import Iterator

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env
from tests_support.fake_answers import by_role
from tests_support.fake_model_server import FakeModelConfig, FakeModelServer

import cua_rl.env
from cua_rl.env.async_env import AsyncDesktopEnv
from cua_rl.env.tasks import DEFAULT_LOCAL_TASK, load_env_tasks
from cua_rl.env.vector import DesktopVectorEnv
from cua_rl.tasks.golden_files import read_golden

pytestmark = pytest.mark.desktop

LOCAL_ID = "cua_rl/Local-v0"
POLL_S = 20.0
"""Deadline of a golden `until` poll run as an action (below the action timeout)."""


@pytest.fixture(scope="module", autouse=True)
def desktops(local_desktops_module: None) -> Iterator[None]:
    yield
    cua_rl.env.shutdown()


@pytest.fixture(scope="module")
def local_desktops_module() -> None:
    from tests_support.desktops import local_desktops_unavailable

    if (reason := local_desktops_unavailable()) is not None:
        pytest.skip(reason)


def golden_actions(variant_name: str) -> list[str]:
    """The default task's golden solution as step() actions: its pyautogui steps as
    they are, and its `until` polls (readiness waits) as pyautogui-side Python that
    polls the same command with a deadline, so nothing reaches the desktop but step()."""
    task = load_env_tasks("local", DEFAULT_LOCAL_TASK, None)[0][0]
    actions = []
    for step in read_golden(task)[variant_name]:
        ((kind, value),) = step.items()
        if kind == "pyautogui":
            actions.append(value)
            continue
        assert kind == "execute" and set(value["until"]) == {"returncode"}, step
        actions.append(
            "import subprocess\n"
            f"_end = time.monotonic() + {POLL_S}\n"
            f"while subprocess.run({json.dumps(value['command'])}, shell={value['shell']!r})"
            f".returncode != {value['until']['returncode']}:\n"
            f"    assert time.monotonic() < _end, 'golden until not met in {POLL_S} s'\n"
            "    time.sleep(0.05)\n"
        )
    return actions


def test_check_env_passes_on_local_v0_unwrapped() -> None:
    env = gymnasium.make(LOCAL_ID)
    assert env.spec is not None and env.spec.nondeterministic
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)
    env.close()
    ours = [str(w.message) for w in caught if "gymnasium" in w.filename]
    assert ours == []


def test_golden_solution_through_step_scores_1_and_fail_scores_0() -> None:
    env = gymnasium.make(LOCAL_ID)
    obs, info = env.reset(seed=7)
    assert obs in env.observation_space
    assert info["variant"] == "click_blue_half" and "right half" in obs["instruction"]
    for action in golden_actions("click_blue_half"):
        obs, reward, terminated, truncated, info = env.step(action)
        assert info["act"]["status"] == "success", info["act"]
        assert (reward, terminated, truncated) == (0.0, False, False)
    obs, reward, terminated, truncated, info = env.step("DONE")
    assert (reward, terminated, truncated, info["score"]) == (1.0, True, False, 1.0)
    assert obs["screenshot"].shape == (1080, 1920, 3)

    # computer_use calls: a click on the blue half, then a declared failure scores 0
    env.reset()
    obs, reward, terminated, _, info = env.step(
        {"name": "computer_use", "arguments": {"action": "left_click", "coordinate": [1500, 500]}}
    )
    assert info["action"]["code"] == "pyautogui.click(1500, 500)" and reward == 0.0
    obs, reward, terminated, _, info = env.step({"action": "wait", "time": 0.1})
    assert info["act"]["status"] == "success" and info["action"]["code"] == "time.sleep(0.1)"
    obs, reward, terminated, _, info = env.step("not python (")
    assert info["action"]["parse_error"].startswith("bad_code") and info["act"] is None
    obs, reward, terminated, truncated, info = env.step(
        {"action": "terminate", "status": "failure"}
    )
    assert (reward, terminated, truncated) == (0.0, True, False)
    with pytest.raises(RuntimeError, match="reset"):
        env.step("DONE")
    env.close()


def test_a_step_past_its_deadline_raises_and_the_next_reset_gets_a_working_desktop() -> None:
    env = gymnasium.make(LOCAL_ID, step_timeout_s=1.0)
    try:
        env.reset()
        with pytest.raises(TimeoutError, match="step: not done within 1 s"):
            env.step("time.sleep(20)")  # a hung action: the desktop's state is unknown
        obs, info = env.reset()  # waits for the replaced desktop, resets it, sets up
        assert not info["reused"] and obs in env.observation_space
        _, reward, terminated, _, info = env.step("FAIL")
        assert terminated and reward == 0.0 and info["act"] is None
    finally:
        env.close()


def test_vector_env_steps_two_desktops_and_autoresets() -> None:
    envs = DesktopVectorEnv(2, max_steps=2)
    try:
        obs, infos = envs.reset(seed=0)
        assert obs["screenshot"].shape == (2, 1080, 1920, 3)
        assert len(set(infos["desktop"])) == 2
        click, poll = golden_actions("click_blue_half")
        left = {"action": "left_click", "coordinate": [100, 500]}
        _, rewards, terms, truncs, infos = envs.step([click + "\n" + poll, left])
        assert list(rewards) == [0.0, 0.0] and not terms.any() and not truncs.any()
        _, rewards, terms, truncs, infos = envs.step(["DONE", "WAIT"])
        assert list(rewards) == [1.0, 0.0]
        assert list(terms) == [True, False] and list(truncs) == [False, True]
        obs, rewards, terms, truncs, infos = envs.step(["DONE", "DONE"])  # both autoreset
        assert list(rewards) == [0.0, 0.0] and not (terms | truncs).any()
        assert list(infos["task_id"]) == [DEFAULT_LOCAL_TASK] * 2
        assert obs in envs.observation_space
    finally:
        envs.close()


def test_async_env_reward_model_votes_land_in_info_and_reward() -> None:
    """The asyncio interface on the caller's own loop, which also serves the scripted
    reward model: awaiting a step must not block it (the judge calls it meanwhile)."""

    async def episode() -> None:
        # answers every judge with \boxed{-1}
        server = FakeModelServer(FakeModelConfig(answer=by_role(["default"])))
        url = await server.start()
        tasks = load_env_tasks("local", DEFAULT_LOCAL_TASK, None)
        try:
            async with AsyncDesktopEnv(
                tasks, judge_urls=[url], judge={"votes": 2}, prm_weight=0.5
            ) as env:
                obs, _ = await env.reset(seed=3)
                assert obs["screenshot"].shape == (1080, 1920, 3)
                _, reward, _, _, info = await env.step(
                    {"action": "mouse_move", "coordinate": [10, 10]}
                )
                assert info["prm"]["votes"] == [-1, -1] and reward == -0.5
                _, reward, terminated, _, info = await env.step("DONE")
                assert terminated and info["score"] == 0.0 and reward == -0.5
        finally:
            await server.stop()
        prompt = json.dumps(server.messages[0])
        assert prompt.count("data:image/") == 2 and "mouse_move" in prompt

    asyncio.run(episode())
