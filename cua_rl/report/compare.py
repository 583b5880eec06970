"""`cua-rl runs compare A B`: whether two evaluations differ beyond noise, and where.

In the order a reader needs it:
1. what differs in what ran, beyond the model (code, desktops' image, tasks,
   agent settings, protocol), from the two manifests: a score difference means
   little if the harness changed too; then the model's own differences;
2. per task, B's mean score minus A's, over the tasks both sides scored, and the
   overall difference with its paired bootstrap interval (tasks resampled in
   pairs, runs nested; `report.stats`);
3. the tasks that flipped: solved (a mean score of at least 0.5 over the task's
   runs) on one side and not on the other;
4. McNemar's exact test on those solved/unsolved pairs, and one plain sentence:
   beyond noise when the test and the interval agree that it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cua_rl.report.compare_sides import Side
from cua_rl.report.manifest.differences import Difference, differences, summarize
from cua_rl.report.stats import McNemar, PairedComparison, mcnemar, paired_bootstrap

SOLVED = 0.5
"""A task is solved on a side when its mean score over the side's runs reaches this."""
ALPHA = 0.05


@dataclass
class Comparison:
    a: Side
    b: Side
    common: list[str]
    beyond_model: list[Difference] = field(default_factory=list)
    model: list[Difference] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    overall: PairedComparison | None = None
    domains: dict[str, PairedComparison] = field(default_factory=dict)
    test: McNemar | None = None
    gained: list[str] = field(default_factory=list)
    """Solved on B, not on A."""
    lost: list[str] = field(default_factory=list)
    """Solved on A, not on B."""

    @property
    def only_a(self) -> list[str]:
        return sorted(set(self.a.scores) - set(self.b.scores))

    @property
    def only_b(self) -> list[str]:
        return sorted(set(self.b.scores) - set(self.a.scores))

    def verdict(self) -> str:
        """The plain sentence: is B's difference from A beyond noise?"""
        if self.overall is None or self.test is None or not self.common:
            return "No task is scored on both sides: there is nothing to compare."
        d = self.overall.difference
        points = 100 * (d.estimate or 0.0)
        interval = f"[{100 * d.low:+.1f}, {100 * d.high:+.1f}]"  # type: ignore[operator]  # an estimate present implies both bounds
        flips = f"{len(self.gained)} task(s) gained, {len(self.lost)} lost"
        p = f"McNemar p = {self.test.p_value:.3g}"
        excludes = not d.brackets(0.0)
        if all(self.a.mean(t) == self.b.mean(t) for t in self.common):
            return (
                f"B scores the same as A on the {len(self.common)} common tasks (a "
                f"difference of 0.0 points, 0 flips): no difference."
            )
        if self.test.p_value < ALPHA and excludes:
            way = "higher" if points > 0 else "lower"
            return (
                f"B is {abs(points):.1f} points {way} than A on {len(self.common)} common "
                f"tasks (95 % interval {interval}; {flips}): beyond noise ({p} < {ALPHA} "
                "and the paired interval excludes 0)."
            )
        if self.test.p_value >= ALPHA and not excludes:
            return (
                f"B differs from A by {points:+.1f} points on {len(self.common)} common "
                f"tasks (95 % interval {interval}; {flips}): within noise ({p} and the "
                "paired interval includes 0)."
            )
        return (
            f"B differs from A by {points:+.1f} points on {len(self.common)} common tasks "
            f"(95 % interval {interval}; {flips}): not clearly beyond noise ({p}, while "
            f"the paired interval {'excludes' if excludes else 'includes'} 0); more runs "
            "or tasks would settle it."
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "a": self.a.as_dict(),
            "b": self.b.as_dict(),
            "manifest": {
                "beyond_model": [d.as_dict() for d in self.beyond_model],
                "model": [d.as_dict() for d in self.model],
                "notes": self.notes,
            },
            "common_tasks": len(self.common),
            "only_a": self.only_a,
            "only_b": self.only_b,
            "difference": self.overall.as_dict() if self.overall else None,
            "mcnemar": self.test.as_dict() if self.test else None,
            "flips": {"gained": self.gained, "lost": self.lost},
            "domains": {d: c.as_dict() for d, c in self.domains.items()},
            "tasks": {
                t: {
                    "a": self.a.mean(t),
                    "b": self.b.mean(t),
                    "difference": self.b.mean(t) - self.a.mean(t),
                }
                for t in self.common
            },
            "verdict": self.verdict(),
        }


def _manifest_part(out: Comparison) -> None:
    a, b = out.a, out.b
    for side, name in ((a, "A"), (b, "B")):
        if side.manifest is None:
            what = (
                (
                    "an OSWorld results folder: what ran is known only by its model "
                    f"folder's name, `{side.model}`"
                )
                if side.kind != "cua-rl eval"
                else "a run made before manifests"
            )
            out.notes.append(f"{name} has no manifest ({what})")
    if a.manifest is not None and b.manifest is not None:
        found = differences(a.manifest, b.manifest)
        out.beyond_model = [d for d in found if d.section != "model"]
        out.model = [d for d in found if d.section == "model"]
    elif a.model != b.model:
        out.notes.append(f"models: {a.model} -> {b.model}")


def compare(a: Side, b: Side) -> Comparison:
    """B against A (see the module docstring)."""
    common = sorted(set(a.scores) & set(b.scores))
    out = Comparison(a, b, common)
    _manifest_part(out)
    if not common:
        return out
    out.overall = paired_bootstrap([b.scores[t] for t in common], [a.scores[t] for t in common])
    for domain in sorted({a.domains.get(t, "") for t in common}):
        tasks = [t for t in common if a.domains.get(t, "") == domain]
        out.domains[domain or "(none)"] = paired_bootstrap(
            [b.scores[t] for t in tasks], [a.scores[t] for t in tasks]
        )
    solved = {t: (a.mean(t) >= SOLVED, b.mean(t) >= SOLVED) for t in common}
    out.test = mcnemar(solved.values())
    out.gained = [t for t, (x, y) in solved.items() if y and not x]
    out.lost = [t for t, (x, y) in solved.items() if x and not y]
    return out


def render_lines(result: Comparison, tasks_shown: int = 30) -> list[str]:
    """The human form: manifest differences beyond the model first, then the model's,
    the overall difference and the sentence, per-domain differences, the flips."""
    a, b = result.a, result.b
    lines = [
        f"A: {a.path} ({a.kind}, model {a.model}, {len(a.scores)} tasks scored)",
        f"B: {b.path} ({b.kind}, model {b.model}, {len(b.scores)} tasks scored)",
        "",
    ]
    lines.append("What differs beyond the model:")
    if a.manifest is None or b.manifest is None:
        lines.append("  unknown (a side has no manifest, see below)")
    else:
        lines += [f"  {line}" for line in summarize(result.beyond_model)] or ["  nothing"]
    if result.model:
        lines += ["The model:", *(f"  {line}" for line in summarize(result.model))]
    lines += [f"  note: {note}" for note in result.notes]
    lines += ["", result.verdict()]
    if result.only_a or result.only_b:
        lines.append(
            f"Left out (scored on one side only): {len(result.only_a)} task(s) of A, "
            f"{len(result.only_b)} of B."
        )
    if result.domains:
        lines += ["", "Per domain (B - A, points, 95 % interval):"]
        for domain, c in result.domains.items():
            d = c.difference
            lines.append(
                f"  {domain}: {100 * (d.estimate or 0):+.1f} "
                f"[{100 * (d.low or 0):+.1f}, {100 * (d.high or 0):+.1f}] over {d.n} "
                "task(s)"
            )
    for name, tasks in (
        ("Gained (solved on B only)", result.gained),
        ("Lost (solved on A only)", result.lost),
    ):
        if tasks:
            shown = ", ".join(tasks[:tasks_shown])
            more = f" and {len(tasks) - tasks_shown} more" if len(tasks) > tasks_shown else ""
            lines.append(f"{name}: {shown}{more}")
    return lines
