"""The PNG of `cua-rl runs compare --png`: B minus A per domain and overall, in
points, each with its paired 95 % interval (bars crossing zero are within noise)."""

from __future__ import annotations

from pathlib import Path

from cua_rl.report.compare import Comparison


def plot_comparison(result: Comparison, out: Path) -> Path:
    """Draw the per-domain and overall differences (nothing to draw: a note)."""
    from cua_rl.report.plots import bar_chart

    scopes = {**result.domains, **({"Overall": result.overall} if result.overall else {})}
    values, errors = {}, {}
    for name, c in scopes.items():
        d = c.difference
        values[name] = 100 * (d.estimate or 0.0)
        if d.low is not None and d.high is not None:
            errors[name] = (100 * d.low, 100 * d.high)
    return bar_chart(
        values,
        f"B - A: {result.b.model} vs {result.a.model}",
        out,
        ylabel="Difference in success rate (points)",
        ymax=None,
        highlight=("Overall",),
        value_format="{:+.1f}",
        errors=errors,
    )
