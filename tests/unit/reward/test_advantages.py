import math

import pytest

from cua_rl.reward.advantages import (
    policy_advantages,
    prm_task_eligible,
    prm_vote_advantages,
    standardize,
    step_rewards,
)


def test_step_rewards_hand_computed() -> None:
    # O = 1, votes (1, 1, -1) -> 1 + 1/3 ; O = -1, votes (-1,-1,-1) with lambda 0.5 -> -1.5
    assert step_rewards(1, [(1, 1, -1)]) == pytest.approx([1 + 1 / 3])
    assert step_rewards(-1, [(-1, -1, -1), ()], lam=0.5) == pytest.approx([-1.5, -1.0])


def test_standardize_cases() -> None:
    assert standardize([5.0]) == [0.0]  # a lone sample has no baseline: no signal
    assert standardize([]) == []
    assert standardize([2.0, 2.0]) == [0.0, 0.0]
    assert standardize([0.0, 2.0]) == pytest.approx([-1.0, 1.0])


def test_policy_advantages_per_step_index() -> None:
    # trajectory a: R = [2, 0], b: R = [0] (shorter), c: R = [2, 0, 1]
    advs = policy_advantages({"a": [2.0, 0.0], "b": [0.0], "c": [2.0, 0.0, 1.0]})
    by_key = {(a.trajectory_id, a.step_index): a.advantage for a in advs}
    # step 0 over (2, 0, 2): mean 4/3, std sqrt(8/9)
    std = math.sqrt(8 / 9)
    assert by_key[("a", 0)] == pytest.approx((2 - 4 / 3) / std)
    assert by_key[("b", 0)] == pytest.approx((0 - 4 / 3) / std)
    # step 1 over (0, 0): no spread -> dropped
    assert ("a", 1) not in by_key and ("c", 1) not in by_key
    # step 2: only c got there: no baseline, advantage 0, dropped
    assert ("c", 2) not in by_key


def test_lone_trajectory_tail_gets_zero_not_its_raw_reward() -> None:
    # The longest failure's tail steps (R = -2: O = -1, all votes -1) are reached by
    # no other trajectory; they must not get -2 as an advantage.
    rewards = {"short": [0.0, 0.0], "long": [-2.0, -2.0, -2.0, -2.0]}
    advs = policy_advantages(rewards, keep_zero=True)
    by_key = {(a.trajectory_id, a.step_index): a.advantage for a in advs}
    assert by_key[("long", 2)] == 0.0 and by_key[("long", 3)] == 0.0
    assert by_key[("long", 0)] == pytest.approx(-1.0)
    assert by_key[("short", 0)] == pytest.approx(1.0)
    # without keep_zero the tail is dropped, not trained with a made-up advantage
    assert {(a.trajectory_id, a.step_index) for a in policy_advantages(rewards)} == {
        ("long", 0),
        ("long", 1),
        ("short", 0),
        ("short", 1),
    }


def test_prm_vote_advantages() -> None:
    # R = 1.5; votes (1, -1, 0) -> rewards (1.5, -1.5, -2)
    advs = prm_vote_advantages(1.5, [1, -1, 0])
    rewards = [1.5, -1.5, -2.0]
    mean = sum(rewards) / 3
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / 3)
    assert advs == pytest.approx([(r - mean) / std for r in rewards])
    assert advs[0] > 0 > advs[1] > advs[2]
    assert prm_vote_advantages(-1.0, [-1, -1, -1]) == [0.0, 0.0, 0.0]


@pytest.mark.parametrize(
    ("acc", "ok"),
    [(0.0, False), (0.19, False), (0.2, True), (0.5, True), (0.8, True), (0.81, False)],
)
def test_prm_task_filter(acc: float, ok: bool) -> None:
    assert prm_task_eligible(acc) is ok
