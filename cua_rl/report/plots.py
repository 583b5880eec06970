"""Report figures: one house style, written as PNG files with the Agg backend.

matplotlib is imported here at module level on purpose: only the report writer
imports this module (lazily), so `cua-rl --help` and the runtime never pay for it.
Agg renders without a display, which is what evaluation hosts and CI have.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

BASE_COLOR = "#4C72B0"
HIGHLIGHT_COLOR = "#DD8452"


MAX_DISCRETE_LEVELS = 12
"""A series with at most this many distinct values (outcomes, votes agreeing out of
a few, version lags) is drawn with vertical jitter: otherwise its points stack
into a few lines and their density cannot be seen."""


def point_style(n: int) -> dict[str, float]:
    """Marker size and alpha for `n` per-trajectory points: dots a reader can see
    on a short run, and a translucent cloud (density stays visible) on a long one."""
    return {
        "s": 18.0 if n <= 500 else 8.0,
        "alpha": float(min(0.7, max(0.12, 8.0 / np.sqrt(max(n, 1))))),
    }


def jitter(y: np.ndarray, seed: int = 0) -> tuple[np.ndarray, float]:
    """`y` with a small vertical jitter when it takes few distinct values that
    repeat (points would hide each other), and the jitter's half-width (0.0 when
    none was added). A fixed seed keeps the figure the same from one run of
    `plot` to the next."""
    levels = np.unique(y)
    if len(levels) > MAX_DISCRETE_LEVELS or len(levels) == len(y):
        return y, 0.0
    gap = float(np.min(np.diff(levels))) if len(levels) > 1 else 1.0
    half = 0.15 * gap
    return y + np.random.default_rng(seed).uniform(-half, half, len(y)), half


def new_figure(width: float = 8.0, height: float = 4.5) -> tuple[Figure, Axes]:
    """A figure and axes in the house style (light grid under the data, no top/right
    spines), shared by every report plot so they read alike side by side."""
    fig, ax = plt.subplots(figsize=(width, height), dpi=120)
    ax.set_axisbelow(True)
    ax.grid(axis="y", color="#dddddd", linewidth=0.8)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return fig, ax


def save_figure(fig: Figure, out_path: Path) -> Path:
    """Write the figure as PNG and free it (long runs draw many figures)."""
    out_path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out_path, format="png")
    plt.close(fig)
    return out_path


def bar_chart(
    values: Mapping[str, float],
    title: str,
    out_path: Path,
    *,
    ylabel: str = "Success rate (%)",
    ymax: float | None = 100.0,
    highlight: Collection[str] = (),
    value_format: str = "{:.1f}",
    errors: Mapping[str, tuple[float, float]] | None = None,
) -> Path:
    """One bar per entry, in the given order, each labelled with its value;
    entries named in `highlight` (aggregates such as groups) get a second colour;
    `errors` gives an entry its interval (low, high), drawn as an error bar."""
    fig, ax = new_figure(width=max(6.0, 0.7 * len(values) + 2.0))
    labels = list(values)
    heights = [values[k] for k in labels]
    colors = [HIGHLIGHT_COLOR if k in highlight else BASE_COLOR for k in labels]
    yerr = None
    if errors:
        bounds = [errors.get(k, (h, h)) for k, h in zip(labels, heights, strict=True)]
        yerr = np.array(
            [
                [max(0.0, h - lo) for (lo, _), h in zip(bounds, heights, strict=True)],
                [max(0.0, hi - h) for (_, hi), h in zip(bounds, heights, strict=True)],
            ]
        )
    bars = ax.bar(
        range(len(labels)),
        heights,
        color=colors,
        width=0.7,
        yerr=yerr,
        error_kw={"ecolor": "#333333", "capsize": 3, "linewidth": 1},
    )
    ax.bar_label(bars, labels=[value_format.format(h) for h in heights], padding=2, fontsize=8)
    ax.set_xticks(range(len(labels)), labels, rotation=35, ha="right", fontsize=9)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if ymax is not None:
        tops = [hi for _, hi in errors.values()] if errors else []
        ax.set_ylim(0, max([ymax, *heights, *tops]) * 1.08)  # room for the value labels
    return save_figure(fig, out_path)
