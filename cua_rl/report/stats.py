"""The statistics of evaluation reports and experiment cells: intervals of a rate,
paired differences, McNemar's test, and pass@k / pass^k.

One helper for every figure a reader compares, so an evaluation report, `cua-rl
runs compare` and the experiment runner compute an interval the same way and
name how. Each result carries its method; each resampling takes a seed (default
`SEED`), so a report written again from the same scores is the same report.

- **Tasks resampled, runs nested** (`nested_bootstrap_interval`): an evaluation's
  rate is a mean over tasks of each task's mean over its runs. Both levels vary:
  which tasks a benchmark happens to hold, and what one run of a task scores. A
  resample draws the tasks with replacement, then each drawn task's runs with
  replacement; the interval is the percentile interval of the resampled rates.
- **Paired** (`paired_bootstrap`, `paired_differences`): two evaluations of the
  same tasks (or two cells of the same seeds) differ by the mean of their per-task
  (per-seed) differences; resampling the pairs keeps each task's difficulty in
  both sides, which is what makes a paired interval narrower than two separate
  ones. Both sides' runs are resampled with the same draws, so an evaluation
  compared with itself differs by exactly zero in every resample.
- **McNemar** (`mcnemar`): on paired pass/fail outcomes only the discordant pairs
  carry information; the exact two-sided binomial test on them.
- **pass@k and pass^k** (`pass_at_k`, `pass_hat_k`): from n runs of a task, the
  expected best (pass@k) and worst (pass^k) score of k runs drawn without
  replacement. For 0/1 scores these are the unbiased estimators 1 - C(n-c, k)/C(n, k)
  (Chen et al., 2021) and C(c, k)/C(n, k) (Yao et al., 2024); with partial
  credit they stay exact expectations, so pass@1 is always the mean score.
- **A handful of values** (`mean_interval`): a per-seed mean of n = 3 has a
  Student t interval; a percentile bootstrap of so few values is too narrow.

numpy draws the resamples; scipy gives the t quantile and the exact binomial test
(scipy is in the `eval` extra, which an evaluation host installs for the metrics).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

SEED = 0
"""Default seed of every resampling."""
RESAMPLES = 2000
"""Default bootstrap resamples (percentile bounds then move by well under a point)."""
LEVEL = 0.95
T_BELOW = 10
"""`mean_interval(method="auto")` takes the t interval below this many values."""

Method = Literal["auto", "t", "bootstrap"]


@dataclass(frozen=True, slots=True)
class Interval:
    """An estimate with its interval; `low`/`high` are None when the data cannot
    give one (fewer than two values for a t interval, no value at all)."""

    estimate: float | None
    low: float | None
    high: float | None
    method: str
    """`t`, `bootstrap`, `nested bootstrap` or `none` (no interval)."""
    n: int
    """Values (or tasks) the estimate is over: the denominator."""
    level: float = LEVEL

    def brackets(self, value: float, tol: float = 1e-12) -> bool:
        """Whether `value` lies in [low, high] (False without an interval)."""
        return (
            self.low is not None
            and self.high is not None
            and self.low - tol <= value <= self.high + tol
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "estimate": self.estimate,
            "low": self.low,
            "high": self.high,
            "method": self.method,
            "n": self.n,
            "level": self.level,
        }


def _percentile(samples: np.ndarray, level: float) -> tuple[float, float]:
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(samples, [tail, 100 - tail])
    return float(low), float(high)


def t_interval(values: Sequence[float], level: float = LEVEL) -> Interval:
    """Student's t interval of the mean (no interval for fewer than two values)."""
    data = np.asarray(values, dtype=float)
    n = len(data)
    if n == 0:
        return Interval(None, None, None, "none", 0, level)
    mean = float(data.mean())
    if n < 2:
        return Interval(mean, None, None, "none", n, level)
    from scipy.stats import t

    half = float(t.ppf((1 + level) / 2, n - 1)) * float(data.std(ddof=1)) / math.sqrt(n)
    return Interval(mean, mean - half, mean + half, "t", n, level)


def bootstrap_interval(
    values: Sequence[float], *, level: float = LEVEL, resamples: int = RESAMPLES, seed: int = SEED
) -> Interval:
    """Percentile bootstrap interval of the mean of `values`."""
    data = np.asarray(values, dtype=float)
    n = len(data)
    if n == 0:
        return Interval(None, None, None, "none", 0, level)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, n, size=(resamples, n))].mean(axis=1)
    return Interval(float(data.mean()), *_percentile(means, level), "bootstrap", n, level)


def mean_interval(
    values: Sequence[float],
    method: Method = "auto",
    *,
    level: float = LEVEL,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> Interval:
    """The mean of `values` with its interval: `t` (a handful of values, such as one
    figure per seed), `bootstrap`, or `auto` (t below `T_BELOW` values)."""
    if method == "auto":
        method = "t" if len(values) < T_BELOW else "bootstrap"
    if method == "t":
        return t_interval(values, level)
    if method == "bootstrap":
        return bootstrap_interval(values, level=level, resamples=resamples, seed=seed)
    raise ValueError(f"method must be auto, t or bootstrap, got {method!r}")


def _run_matrix(task_scores: Sequence[Sequence[float]]) -> tuple[np.ndarray, np.ndarray]:
    """Scores padded to a (tasks, max runs) matrix, and each task's run count."""
    counts = np.array([len(s) for s in task_scores], dtype=int)
    if (counts == 0).any():
        raise ValueError(
            "every task needs at least one score (count a task without "
            "a run as [0.0] where it must count)"
        )
    matrix = np.zeros((len(task_scores), int(counts.max())))
    for i, scores in enumerate(task_scores):
        matrix[i, : len(scores)] = scores
    return matrix, counts


def _nested_means(
    matrix: np.ndarray, counts: np.ndarray, tasks: np.ndarray, runs: np.ndarray
) -> np.ndarray:
    """Mean over the drawn tasks of each one's mean over its drawn runs.

    `tasks` (resamples, n) are task indices; `runs` (resamples, n, max runs) are
    uniform draws in [0, 1), turned into run indices below each task's count."""
    n_runs = counts[tasks]  # (B, n)
    picks = np.minimum((runs * n_runs[..., None]).astype(int), n_runs[..., None] - 1)
    drawn = matrix[tasks[..., None], picks]  # (B, n, max runs)
    width = runs.shape[-1]
    used = np.arange(width)[None, None, :] < n_runs[..., None]
    return ((drawn * used).sum(axis=-1) / n_runs).mean(axis=-1)


def nested_bootstrap_interval(
    task_scores: Sequence[Sequence[float]],
    *,
    level: float = LEVEL,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> Interval:
    """The mean over tasks of each task's mean score, with the percentile interval
    of resamples that draw tasks, then each drawn task's runs, with replacement."""
    if not task_scores:
        return Interval(None, None, None, "none", 0, level)
    matrix, counts = _run_matrix(task_scores)
    n = len(counts)
    estimate = float((matrix.sum(axis=1) / counts).mean())
    rng = np.random.default_rng(seed)
    tasks = rng.integers(0, n, size=(resamples, n))
    runs = rng.random((resamples, n, matrix.shape[1]))
    low, high = _percentile(_nested_means(matrix, counts, tasks, runs), level)
    return Interval(estimate, low, high, "nested bootstrap", n, level)


@dataclass(frozen=True, slots=True)
class PairedComparison:
    """Side A minus side B over the same tasks."""

    difference: Interval
    """Mean of the per-task differences, with its paired bootstrap interval."""
    p_value: float
    """Two-sided: twice the smaller share of resampled differences on either side
    of zero (capped at 1)."""

    def as_dict(self) -> dict[str, Any]:
        return {"difference": self.difference.as_dict(), "p_value": self.p_value}


def paired_bootstrap(
    a: Sequence[Sequence[float]],
    b: Sequence[Sequence[float]],
    *,
    level: float = LEVEL,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> PairedComparison:
    """A's rate minus B's over the same tasks (`a[i]` and `b[i]` are the run scores
    of task i on each side), tasks resampled in pairs and runs nested within each
    side with common draws."""
    if len(a) != len(b):
        raise ValueError(f"paired sides need the same tasks: {len(a)} against {len(b)}")
    if not a:
        return PairedComparison(Interval(None, None, None, "none", 0, level), 1.0)
    (ma, ca), (mb, cb) = _run_matrix(a), _run_matrix(b)
    n = len(ca)
    estimate = float((ma.sum(axis=1) / ca - mb.sum(axis=1) / cb).mean())
    rng = np.random.default_rng(seed)
    tasks = rng.integers(0, n, size=(resamples, n))
    runs = rng.random((resamples, n, max(ma.shape[1], mb.shape[1])))
    diffs = _nested_means(ma, ca, tasks, runs[..., : ma.shape[1]]) - _nested_means(
        mb, cb, tasks, runs[..., : mb.shape[1]]
    )
    low, high = _percentile(diffs, level)
    tol = 1e-12
    share = min(float((diffs <= tol).mean()), float((diffs >= -tol).mean()))
    return PairedComparison(
        Interval(estimate, low, high, "paired nested bootstrap", n, level), min(1.0, 2 * share)
    )


@dataclass(frozen=True, slots=True)
class McNemar:
    """Paired pass/fail outcomes: `a_only` pairs pass on A and fail on B, `b_only`
    the reverse; the exact two-sided binomial test on the discordant pairs."""

    a_only: int
    b_only: int
    n: int
    """Pairs in all (the concordant ones included)."""
    p_value: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "a_only": self.a_only,
            "b_only": self.b_only,
            "n": self.n,
            "p_value": self.p_value,
            "method": "exact McNemar (binomial, two-sided)",
        }


def mcnemar(pairs: Iterable[tuple[bool, bool]]) -> McNemar:
    """McNemar's exact test on (passed on A, passed on B) pairs."""
    from scipy.stats import binomtest

    outcomes = [(bool(x), bool(y)) for x, y in pairs]
    a_only = sum(x and not y for x, y in outcomes)
    b_only = sum(y and not x for x, y in outcomes)
    discordant = a_only + b_only
    p = 1.0 if discordant == 0 else float(binomtest(a_only, discordant, 0.5).pvalue)
    return McNemar(a_only, b_only, len(outcomes), min(1.0, p))


K = Hashable


@dataclass(frozen=True, slots=True)
class PairedDifferences:
    """A minus B per common key (a seed, a task), and the mean difference's interval."""

    differences: dict[Any, float]
    interval: Interval
    only_a: list[Any] = field(default_factory=list)
    only_b: list[Any] = field(default_factory=list)
    """Keys on one side only (left out of the differences)."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "differences": {str(k): v for k, v in self.differences.items()},
            "interval": self.interval.as_dict(),
            "only_a": [str(k) for k in self.only_a],
            "only_b": [str(k) for k in self.only_b],
        }


def paired_differences(
    a: Mapping[K, float],
    b: Mapping[K, float],
    method: Method = "auto",
    *,
    level: float = LEVEL,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> PairedDifferences:
    """`a[key] - b[key]` for every key both sides have (in A's order), and the mean
    difference with `mean_interval` (a t interval for a handful of seeds)."""
    common = [k for k in a if k in b]
    diffs = {k: float(a[k]) - float(b[k]) for k in common}
    interval = mean_interval(
        list(diffs.values()), method, level=level, resamples=resamples, seed=seed
    )
    return PairedDifferences(
        diffs, interval, [k for k in a if k not in b], [k for k in b if k not in a]
    )


def _order_weights(n: int, k: int, best: bool) -> list[float]:
    """P(the i-th smallest of n values is the max (best) / min of k drawn)."""
    if not 1 <= k <= n:
        raise ValueError(f"k must be in 1..{n} (the runs), got {k}")
    total = math.comb(n, k)
    if best:
        return [math.comb(i, k - 1) / total for i in range(n)]
    return [math.comb(n - 1 - i, k - 1) / total for i in range(n)]


def pass_at_k(scores: Sequence[float], k: int) -> float:
    """Expected best score of k of these runs drawn without replacement: for 0/1
    scores the unbiased pass@k, 1 - C(n-c, k)/C(n, k)."""
    ordered = sorted(float(s) for s in scores)
    return sum(w * s for w, s in zip(_order_weights(len(ordered), k, True), ordered, strict=True))


def pass_hat_k(scores: Sequence[float], k: int) -> float:
    """Expected worst score of k of these runs drawn without replacement: for 0/1
    scores the unbiased pass^k, C(c, k)/C(n, k)."""
    ordered = sorted(float(s) for s in scores)
    return sum(w * s for w, s in zip(_order_weights(len(ordered), k, False), ordered, strict=True))
