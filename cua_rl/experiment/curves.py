"""curves.png: success per policy version, the mean over seeds with its 95 % band,
one line per arm; one panel per evaluation set (in-domain, out-of-domain)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

TITLES = {"in_domain": "in-domain success", "out_of_domain": "out-of-domain success"}


def write_curves(table: dict[str, Any], path: Path) -> Path:
    """Draw `table["curves"]` (table.build_table) into `path`."""
    import matplotlib.pyplot as plt

    from cua_rl.report.plots import new_figure

    sets = sorted(
        {s for arm in table["curves"].values() for s in arm},
        key=lambda s: list(TITLES).index(s) if s in TITLES else 99,
    )
    fig, first = new_figure(width=6.0 * max(1, len(sets)), height=4.2)
    axes = [first]
    if len(sets) > 1:
        fig.clf()
        axes = list(fig.subplots(1, len(sets), sharey=True))
    labels = {row["arm"]: row["label"] for row in table["rows"]}
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, name in zip(axes, sets, strict=True):
        for i, (arm, curves) in enumerate(table["curves"].items()):
            points = [p for p in curves.get(name, []) if p["estimate"] is not None]
            if not points:
                continue
            color = colors[i % len(colors)]
            xs = [p["version"] for p in points]
            ax.plot(
                xs,
                [p["estimate"] for p in points],
                marker="o",
                color=color,
                label=labels.get(arm, arm),
            )
            banded = [p for p in points if p["low"] is not None]
            if banded:
                # a rate lies in [0, 1]: the band is drawn there (table.json keeps the
                # t interval as computed, which a handful of seeds can push past it)
                ax.fill_between(
                    [p["version"] for p in banded],
                    [max(0.0, p["low"]) for p in banded],
                    [min(1.0, p["high"]) for p in banded],
                    color=color,
                    alpha=0.15,
                    linewidth=0,
                )
        ax.set_xticks([0, *table["versions"]])
        ax.set_title(TITLES.get(name, name))
        ax.set_xlabel("policy version (updates)")
        ax.set_ylim(-0.05, 1.05)
        ax.grid(axis="y", color="#dddddd", linewidth=0.8)
    axes[0].set_ylabel("success (mean over seeds, 95 % band)")
    axes[0].legend(loc="upper left", fontsize=8)
    fig.suptitle(f"{table['experiment']}: seeds {table['seeds']}", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
