"""The reward-model accuracy formulas on hand-computed numbers."""

from __future__ import annotations

import pytest

from cua_rl.reward.accuracy import JudgedStep, majority_label, tally, tally_by, vote_sign


def test_vote_sign_is_the_sign_of_the_mean() -> None:
    assert vote_sign((1, 1, -1)) == 1
    assert vote_sign((-1, 0, 0)) == -1  # unparseable votes are 0 in the mean
    assert vote_sign((1, -1, 0)) == 0  # a tie
    assert vote_sign((0, 0, 0)) == 0  # nothing readable
    assert vote_sign(()) == 0


def test_majority_label_of_parseable_votes() -> None:
    assert majority_label((1, 1, 1, -1, -1, 0, 0, 0)) == 1  # 3 against 2; 0s do not vote
    assert majority_label((-1, 0, 0, 0, 0, 0, 0, 0)) == -1
    assert majority_label((1, 1, -1, -1, 0, 0, 0, 0)) is None  # tie: no label
    assert majority_label((0,) * 8) is None


def _step(
    tid: str,
    i: int,
    outcome: int,
    votes: tuple[int, ...] | None,
    label: int | None = None,
    variant: str = "a:default",
    **kw: bool,
) -> JudgedStep:
    return JudgedStep(tid, i, variant, outcome, votes, label, **kw)


def test_outcome_and_process_accuracy_hand_computed() -> None:
    steps = [
        # trajectory t1 succeeded (+1)
        _step("t1", 0, 1, (1, 1, -1), label=1),  # verdict +1: outcome right, label right
        _step("t1", 1, 1, (-1, -1, 1), label=-1),  # verdict -1: outcome wrong, label right
        _step("t1", 2, 1, (1, -1, 0), label=1),  # tie: wrong on both
        # trajectory t2 failed (-1), on another variant
        _step("t2", 0, -1, (-1, 0, 0), label=None, variant="b:default"),  # right, unlabelled
        _step("t2", 1, -1, (1, 1, 1), label=-1, variant="b:default"),  # wrong, wrong
        _step("t2", 2, -1, None, label=1, variant="b:default"),  # request failed
        _step("t2", 3, -1, (0, 0, 0), variant="b:default", label_tie=True),  # tie, no label
    ]
    overall = tally(steps)
    # judged steps: 6 (one failed); outcome right: t1/0, t2/0 -> 2/6
    assert overall.steps == 6 and overall.outcome_accuracy == pytest.approx(2 / 6)
    # labelled judged steps: t1/0, t1/1, t1/2, t2/1 -> right: t1/0, t1/1 -> 2/4
    assert overall.labelled == 4 and overall.process_accuracy == pytest.approx(2 / 4)
    d = overall.as_dict()
    assert d["unlabelled"] == 2 and d["ties"] == 2 and d["failed_requests"] == 1
    assert d["trajectories"] == 2 and d["votes"] == 18 and d["unparseable_votes"] == 6
    assert d["label_ties"] == 1 and d["label_failed_requests"] == 0

    per = tally_by(steps)
    assert list(per) == ["a:default", "b:default"]
    assert per["a:default"].outcome_accuracy == pytest.approx(1 / 3)
    assert per["a:default"].process_accuracy == pytest.approx(2 / 3)
    assert per["b:default"].outcome_accuracy == pytest.approx(1 / 3)
    assert per["b:default"].process_accuracy == 0.0
    assert per["b:default"].failed_requests == 1


def test_no_judged_or_labelled_step_gives_no_accuracy() -> None:
    empty = tally([_step("t", 0, 1, None, label_failed=True)])
    assert empty.outcome_accuracy is None and empty.process_accuracy is None
    assert empty.failed_requests == 1 and empty.label_failed_requests == 1
    unlabelled = tally([_step("t", 0, -1, (-1, -1, -1))])
    assert unlabelled.outcome_accuracy == 1.0 and unlabelled.process_accuracy is None
