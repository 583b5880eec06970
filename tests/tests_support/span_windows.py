"""Reading a run's spans as time windows, for tests that check what overlapped
(an episode during an update, a sync during a rollout). The report itself needs only
the windows' union (`report.loop_profile.merged`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from cua_rl.report.loop_profile import Span, Window, merged


def intersection_s(a: Iterable[Sequence[float]], b: Iterable[Sequence[float]]) -> float:
    """Seconds during which some interval of `a` and some interval of `b` are both open."""
    ma, mb = merged(a), merged(b)
    total, i, j = 0.0, 0, 0
    while i < len(ma) and j < len(mb):
        total += max(0.0, min(ma[i][1], mb[j][1]) - max(ma[i][0], mb[j][0]))
        if ma[i][1] < mb[j][1]:
            i += 1
        else:
            j += 1
    return total


def overlapping(a: Sequence[Window], b: Sequence[Window]) -> list[tuple[Window, Window]]:
    """Pairs of windows of `a` and `b` that share some time (touching ends do not)."""
    return [(x, y) for x in a for y in b if x.start < y.end and y.start < x.end]


def episode_windows(spans: Iterable[Span]) -> list[Window]:
    """Each episode's [start, end] (its desktop lease to its trajectory saved), by tid."""
    return [
        Window(s["start"], s["end"], str(s.get("tid", ""))) for s in spans if s["kind"] == "episode"
    ]
