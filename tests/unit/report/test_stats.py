"""The statistics helper against hand-computed values: pass@k and pass^k, the t
interval, McNemar's exact test, paired differences, and what the nested and
paired bootstraps must do (runs resampled within tasks, a side against itself
differs by exactly zero, the same seed gives the same interval)."""

from __future__ import annotations

import math

import pytest

from cua_rl.report.stats import (
    T_BELOW,
    mcnemar,
    mean_interval,
    nested_bootstrap_interval,
    paired_bootstrap,
    paired_differences,
    pass_at_k,
    pass_hat_k,
)

T_975_DF2 = 4.302652729911275
"""Student's t quantile 0.975 with 2 degrees of freedom (tables)."""


def test_pass_at_k_and_pass_hat_k_are_the_unbiased_estimators_on_0_1_scores() -> None:
    # n = 4 runs, c = 2 successes: pass@k = 1 - C(2, k)/C(4, k), pass^k = C(2, k)/C(4, k)
    scores = [1.0, 0.0, 1.0, 0.0]
    assert [pass_at_k(scores, k) for k in (1, 2, 3, 4)] == pytest.approx([0.5, 5 / 6, 1, 1])
    assert [pass_hat_k(scores, k) for k in (1, 2, 3, 4)] == pytest.approx([0.5, 1 / 6, 0, 0])
    assert pass_at_k([0.0, 0.0, 0.0], 3) == 0.0 and pass_hat_k([1.0] * 3, 3) == 1.0
    # partial credit: the expected best / worst of k runs; pass@1 is the mean
    assert pass_at_k([0.5, 0.0, 1.0], 1) == pytest.approx(0.5)
    assert pass_at_k([0.5, 0.0, 1.0], 2) == pytest.approx((0.5 + 1 + 1) / 3)
    assert pass_hat_k([0.5, 0.0, 1.0], 2) == pytest.approx((0 + 0 + 0.5) / 3)
    with pytest.raises(ValueError, match="k must be in 1..3"):
        pass_at_k([1.0, 0.0, 1.0], 4)


def test_mean_interval_takes_t_for_a_handful_of_values() -> None:
    values = [0.20, 0.30, 0.25]  # three seeds
    got = mean_interval(values)
    sd = math.sqrt(((0.05) ** 2 + (0.05) ** 2) / 2)
    half = T_975_DF2 * sd / math.sqrt(3)
    assert got.method == "t" and got.n == 3
    assert (got.estimate, got.low, got.high) == pytest.approx((0.25, 0.25 - half, 0.25 + half))
    many = mean_interval([i / 20 for i in range(20)])
    assert many.method == "bootstrap" and len(range(20)) >= T_BELOW
    assert many.brackets(many.estimate) and many == mean_interval([i / 20 for i in range(20)])
    lone = mean_interval([0.4])
    assert (lone.estimate, lone.low, lone.high, lone.method) == (0.4, None, None, "none")
    with pytest.raises(ValueError, match="auto, t or bootstrap"):
        mean_interval(values, "wilson")  # type: ignore[arg-type]


def test_mcnemar_is_the_exact_binomial_test_on_discordant_pairs() -> None:
    three_to_none = mcnemar([(True, False)] * 3 + [(True, True)] * 5 + [(False, False)] * 2)
    assert (three_to_none.a_only, three_to_none.b_only, three_to_none.n) == (3, 0, 10)
    assert three_to_none.p_value == pytest.approx(2 * 0.5**3)
    one_to_four = mcnemar([(True, False)] + [(False, True)] * 4)
    assert one_to_four.p_value == pytest.approx(2 * (1 + 5) / 32)
    assert mcnemar([(True, True), (False, False)]).p_value == 1.0


def test_the_nested_bootstrap_resamples_runs_within_tasks() -> None:
    # One task whose two runs disagree: resampling tasks alone would give [0.5, 0.5];
    # resampling its runs too gives means 0, 0.5 and 1 (a quarter, half, a quarter).
    got = nested_bootstrap_interval([[0.0, 1.0]])
    assert (got.estimate, got.low, got.high, got.n) == (0.5, 0.0, 1.0, 1)
    assert got.method == "nested bootstrap"
    constant = nested_bootstrap_interval([[1.0, 1.0], [0.0, 0.0], [1.0]])
    assert constant.estimate == pytest.approx(2 / 3) and constant.brackets(2 / 3)
    with pytest.raises(ValueError, match="at least one score"):
        nested_bootstrap_interval([[1.0], []])


def test_the_same_seed_gives_the_same_interval() -> None:
    tasks = [[1.0, 0.0, 1.0], [0.0, 0.0, 0.0], [1.0, 1.0, 0.0], [0.5, 1.0, 1.0], [0.0]]
    first, again = nested_bootstrap_interval(tasks), nested_bootstrap_interval(tasks)
    assert first == again and first.brackets(first.estimate)
    other = nested_bootstrap_interval(tasks, seed=7)
    assert other.estimate == first.estimate and other.brackets(other.estimate)


def test_paired_bootstrap_of_a_side_against_itself_is_exactly_zero() -> None:
    tasks = [[1.0, 0.0, 1.0], [0.0, 1.0], [1.0, 1.0, 1.0]]
    same = paired_bootstrap(tasks, tasks)
    assert (same.difference.estimate, same.difference.low, same.difference.high) == (0, 0, 0)
    assert same.p_value == 1.0
    better = paired_bootstrap([[1.0]] * 8, [[0.0]] * 6 + [[1.0]] * 2)
    assert better.difference.estimate == pytest.approx(0.75)
    assert better.difference.brackets(0.75) and not better.difference.brackets(0.0)
    assert better.p_value < 0.05
    with pytest.raises(ValueError, match="same tasks"):
        paired_bootstrap(tasks, tasks[:2])


def test_paired_differences_by_seed() -> None:
    a = {0: 0.30, 1: 0.40, 2: 0.50, 3: 0.9}
    b = {0: 0.20, 1: 0.20, 2: 0.20, 4: 0.1}
    got = paired_differences(a, b)
    assert got.differences == pytest.approx({0: 0.1, 1: 0.2, 2: 0.3})
    assert got.only_a == [3] and got.only_b == [4]
    half = T_975_DF2 * 0.1 / math.sqrt(3)
    assert got.interval.method == "t"
    assert (got.interval.low, got.interval.high) == pytest.approx((0.2 - half, 0.2 + half))
