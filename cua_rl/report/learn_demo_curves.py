"""The learning demo's figures and numbers, read from a training run's store.

Three series, each from what the store records (read-only, so they can be drawn
while a run writes):
- success rate of the training rollouts per policy version (version at start);
- reward-model agreement with the outcome per PRM version: the fraction of votes
  whose sign equals the trajectory's outcome (an unparseable vote, 0, never agrees);
- the difficulty of the variant each rollout served, in finishing order: its index
  in the task's difficulty order (0 = easiest), so a rise means the selector served
  a harder variant.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from cua_rl.report.plots import BASE_COLOR, HIGHLIGHT_COLOR, new_figure, save_figure
from cua_rl.viewer.queries import open_readonly


@dataclass
class DemoSeries:
    success_by_version: dict[int, tuple[int, int]] = field(default_factory=dict)
    """Policy version at start -> (successes, scored rollouts)."""
    agreement_by_version: dict[int, tuple[int, int]] = field(default_factory=dict)
    """PRM version -> (votes agreeing with the outcome, votes)."""
    served: list[tuple[float, str, int]] = field(default_factory=list)
    """(seconds since the first rollout finished, evaluator name, difficulty index)
    of every scored rollout, in finishing order."""
    decisions: list[dict[str, object]] = field(default_factory=list)
    """Algorithm 2's decisions in order: candidate and parent variant names, the
    direction, the parent's and the candidate's group accuracy, accepted or not."""

    def agreement(self, which: str, min_votes: int = 24) -> float | None:
        """Agreement of the first or last PRM version with at least `min_votes` votes
        (the last versions of a run judge only the few rollouts still in flight);
        with none that large, of the first or last version that has votes."""
        if not self.agreement_by_version:
            return None
        versions = [v for v, (_, n) in self.agreement_by_version.items() if n >= min_votes]
        version = (min if which == "first" else max)(versions or self.agreement_by_version)
        agree, total = self.agreement_by_version[version]
        return agree / total

    def harder_served(self, start_index: int) -> list[str]:
        """Variants harder than the starting one that the selector served."""
        return sorted({name for _, name, index in self.served if index > start_index})


def read_demo_series(run_dir: Path, order: list[str]) -> DemoSeries:
    """The three series of a run; `order` is the task's variant names, easiest first
    (a name not in it, e.g. a model rewriter's, is placed after the hardest)."""
    series = DemoSeries()
    conn = open_readonly(run_dir)
    try:
        rows = conn.execute(
            "SELECT t.policy_version_at_start, t.outcome, t.finished_at, v.evaluator_name "
            "FROM trajectories t JOIN variants v ON v.variant_id = t.variant_id "
            "WHERE t.status != 'aborted' AND t.outcome IS NOT NULL ORDER BY t.finished_at"
        ).fetchall()
        votes = conn.execute(
            "SELECT v.prm_version, SUM(v.score = t.outcome), COUNT(*) FROM votes v "
            "JOIN trajectories t ON t.trajectory_id = v.trajectory_id "
            "WHERE t.status != 'aborted' AND t.outcome IS NOT NULL GROUP BY v.prm_version"
        ).fetchall()
        names = dict(conn.execute("SELECT variant_id, evaluator_name FROM variants"))
        decided = [
            json.loads(d)
            for (d,) in conn.execute(
                "SELECT data_json FROM events WHERE kind = 'adapt_decision' ORDER BY id"
            )
        ]
    finally:
        conn.close()
    wins: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    t0 = rows[0][2] if rows else 0.0
    for version, outcome, finished, name in rows:
        wins[version][0] += outcome == 1
        wins[version][1] += 1
        index = order.index(name) if name in order else len(order)
        series.served.append((finished - t0, name, index))
    series.success_by_version = {v: (w, n) for v, (w, n) in sorted(wins.items())}
    series.agreement_by_version = {int(v): (int(a or 0), int(n)) for v, a, n in votes}
    series.decisions = [
        {
            "candidate": names.get(d.get("candidate"), d.get("candidate")),
            "parent": names.get(d.get("parent"), d.get("parent")),
            "direction": d.get("direction"),
            "acc_parent": d.get("acc_parent"),
            "acc_candidate": d.get("acc_candidate"),
            "accepted": bool(d.get("accepted")),
        }
        for d in decided
    ]
    return series


def plot_demo(
    series: DemoSeries,
    order: list[str],
    out_dir: Path,
    *,
    eval_first: float | None = None,
    eval_last: float | None = None,
    last_version: int | None = None,
) -> dict[str, Path]:
    """Write the three PNGs; the evaluation passes (if given) are drawn as points
    on the success curve at the first and the last policy version."""
    out: dict[str, Path] = {}
    fig, ax = new_figure()
    versions = list(series.success_by_version)
    rates = [w / n for w, n in series.success_by_version.values()]
    ax.plot(versions, rates, marker="o", color=BASE_COLOR, label="training rollouts")
    for version, rate, marker, label in (
        (0, eval_first, "s", "evaluation pass, initial policy"),
        (last_version, eval_last, "D", "evaluation pass, final policy"),
    ):
        if rate is not None and version is not None:
            ax.scatter(
                [version], [rate], color=HIGHLIGHT_COLOR, marker=marker, zorder=3, s=60, label=label
            )
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("policy version")
    ax.set_ylabel("success rate")
    ax.set_title("Success rate per policy version")
    ax.legend(loc="best", fontsize=8)
    out["success"] = save_figure(fig, out_dir / "learn_demo_success.png")

    fig, ax = new_figure()
    versions = list(series.agreement_by_version)
    ax.plot(
        versions,
        [a / n for a, n in series.agreement_by_version.values()],
        marker="o",
        color=BASE_COLOR,
    )
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("reward-model version")
    ax.set_ylabel("votes agreeing with the outcome")
    ax.set_title("Reward-model agreement with outcomes per version")
    out["prm_agreement"] = save_figure(fig, out_dir / "learn_demo_prm_agreement.png")

    fig, ax = new_figure()
    ax.step(
        [s / 60 for s, _, _ in series.served],
        [i for _, _, i in series.served],
        where="post",
        color=BASE_COLOR,
    )
    names = order + sorted({n for _, n, i in series.served if i >= len(order)})[:1]
    ax.set_yticks(range(len(names)), names, fontsize=8)
    ax.set_xlabel("minutes into training")
    ax.set_title("Difficulty of the variant served")
    out["difficulty"] = save_figure(fig, out_dir / "learn_demo_difficulty.png")
    return out
