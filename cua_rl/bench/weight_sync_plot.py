"""`bench weight-sync --plot FILE`: GB/s of the weight broadcast per bucket size, one
bar each (its label: the size and the buckets one sync took), the configured
default in the second colour. Imported only when a plot is asked for (matplotlib)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cua_rl.report.plots import bar_chart


def plot_weight_sync(result: dict[str, Any], out_path: Path) -> Path:
    values = {}
    default = None
    for r in result["results"]:
        label = f"{r['bucket_mb']} MiB ({r['buckets']} buckets)"
        values[label] = r["gb_per_s"]
        if r["bucket_mb"] == result["default_bucket_mb"]:
            default = label
    title = (
        f"weight broadcast into the vLLM side's receiver\n{result['link']}, "
        f"{result['bytes'] / 2**20:.0f} MiB bf16, median of {result['repeats']} syncs\n"
        f"{result['date'][:16]}, {result['cpus']} CPUs, load "
        f"{result['load_avg_before'][0]}-{result['load_avg_after'][0]}"
    )
    return bar_chart(
        values,
        title,
        out_path,
        ylabel="GB/s (bytes / sync time)",
        ymax=None,
        highlight=[default] if default else [],
        value_format="{:.2f}",
    )
