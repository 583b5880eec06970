"""`cua-rl tasks parity`: the same goldens on several providers, side by side.

Each input is the output folder of one `cua-rl tasks verify` run (its verify.json:
which provider and image, every task's verdict). The first folder is the reference
(usually local desktops). The result: per domain, how many tasks each provider
attempted and passed (and how many infeasible tasks kept their rule), and every
task whose verdict is not the same on every provider that ran it, with each
provider's status and reason, so a difference between providers is a line to read,
not a figure to trust. Written as parity.md, parity.json and parity.png.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cua_rl.errors import TaskFormatError

PASSING = ("pass", "infeasible")


def load_run(folder: Path) -> dict[str, Any]:
    """A verify run's summary (`verify.json`), checked: TaskFormatError naming the file
    and what was expected."""
    path = folder / "verify.json"
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise TaskFormatError(
            f"{path}: missing (run `cua-rl tasks verify --out {folder}` first)"
        ) from None
    except (OSError, ValueError) as exc:
        raise TaskFormatError(f"{path}: not readable JSON ({exc})") from None
    verdicts = data.get("verdicts") if isinstance(data, dict) else None
    if not isinstance(verdicts, list) or not all(
        isinstance(v, dict) and {"task_id", "domain", "status"} <= v.keys() for v in verdicts
    ):
        raise TaskFormatError(
            f"{path}: expected a `verdicts` list of objects with "
            "task_id, domain and status (cua-rl tasks verify --json)"
        )
    return data


def _labels(runs: Sequence[dict[str, Any]]) -> list[str]:
    """One name per run: its provider (runs before providers existed: local), with a
    number when two runs share one."""
    names = [str(r.get("provider", "local")) for r in runs]
    return [
        f"{n} {names[:i].count(n) + 1}" if names.count(n) > 1 else n for i, n in enumerate(names)
    ]


def _ok(verdict: dict[str, Any]) -> bool:
    return verdict["status"] in PASSING and verdict.get("ok", True)


def compare(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per-domain counts per provider and the tasks whose verdicts differ (module doc)."""
    labels = _labels(runs)
    by_task = [{v["task_id"]: v for v in run["verdicts"]} for run in runs]
    domains: dict[str, dict[str, dict[str, int]]] = {}
    for label, verdicts in zip(labels, by_task, strict=True):
        for v in verdicts.values():
            row = domains.setdefault(v["domain"], {}).setdefault(
                label, {"tasks": 0, "attempted": 0, "pass": 0, "infeasible_ok": 0}
            )
            row["tasks"] += 1
            row["attempted"] += v["status"] in ("pass", "fail_golden", "fail_untouched", "error")
            row["pass"] += v["status"] == "pass"
            row["infeasible_ok"] += v["status"] == "infeasible" and v.get("ok", True)
    differences = []
    for task_id in sorted({t for verdicts in by_task for t in verdicts}):
        seen = {
            label: verdicts[task_id]
            for label, verdicts in zip(labels, by_task, strict=True)
            if task_id in verdicts
        }
        keys = {(v["status"], v.get("ok", True)) for v in seen.values()}
        if len(seen) > 1 and len(keys) > 1:
            any_one = next(iter(seen.values()))
            differences.append(
                {
                    "task_id": task_id,
                    "domain": any_one["domain"],
                    "verdicts": {
                        k: {
                            "status": v["status"],
                            "ok": v.get("ok", True),
                            "reason": v.get("reason", ""),
                        }
                        for k, v in seen.items()
                    },
                }
            )
    totals = {
        label: {
            k: sum(domains[d].get(label, {}).get(k, 0) for d in domains)
            for k in ("tasks", "attempted", "pass", "infeasible_ok")
        }
        for label in labels
    }
    return {
        "providers": labels,
        "images": {label: r.get("image", "host") for label, r in zip(labels, runs, strict=True)},
        "per_domain": dict(sorted(domains.items())),
        "totals": totals,
        "passing_on_reference_only": [
            d["task_id"]
            for d in differences
            if _ok(d["verdicts"].get(labels[0], {"status": ""}))
            and not all(_ok(v) for v in d["verdicts"].values())
        ],
        "differences": differences,
    }


def markdown(result: dict[str, Any]) -> str:
    """The table people read: pass / attempted per domain and provider, then every
    task whose verdict differs."""
    labels = result["providers"]
    lines = [
        "# tasks parity",
        "",
        "Golden solutions proven per provider (pass / attempted; infeasible tasks "
        "whose rule holds in brackets). Images: "
        + ", ".join(f"{k}: {v}" for k, v in result["images"].items())
        + ".",
        "",
        "| domain | " + " | ".join(labels) + " |",
        "|---|" + "---:|" * len(labels),
    ]

    def cell(row: dict[str, int] | None) -> str:
        return (
            "-" if row is None else f"{row['pass']} / {row['attempted']} ({row['infeasible_ok']})"
        )

    for domain, rows in result["per_domain"].items():
        lines.append(f"| {domain} | " + " | ".join(cell(rows.get(lb)) for lb in labels) + " |")
    lines.append(
        "| **all** | " + " | ".join(f"**{cell(result['totals'][lb])}**" for lb in labels) + " |"
    )
    lines += [
        "",
        f"{len(result['differences'])} task(s) whose verdict differs between "
        "providers" + (":" if result["differences"] else "."),
        "",
    ]
    for d in result["differences"]:
        parts = "; ".join(
            f"{k}: {v['status']}"
            + (" (rule broken)" if not v["ok"] else "")
            + (
                f" ({v['reason'][:300]})"
                if v["reason"] and (v["status"] not in PASSING or not v["ok"])
                else ""
            )
            for k, v in d["verdicts"].items()
        )
        lines.append(f"- `{d['domain']}/{d['task_id']}`: {parts}")
    return "\n".join(lines) + "\n"


def plot(result: dict[str, Any], out_path: Path) -> Path:
    """parity.png: per domain, one bar per provider: the goldens passed (filled) out
    of those attempted (outline), so a provider run on a sample reads as one."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels, domains = result["providers"], list(result["per_domain"])
    width = 0.8 / max(len(labels), 1)
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(domains) + 2), 4), dpi=110)
    colors = ("#4C72B0", "#DD8452", "#55A868", "#8172B3", "#937860")
    for i, label in enumerate(labels):
        xs = [x + i * width for x in range(len(domains))]
        rows = [result["per_domain"][d].get(label, {}) for d in domains]
        color = colors[i % len(colors)]
        ax.bar(
            xs,
            [r.get("attempted", 0) for r in rows],
            width,
            fill=False,
            edgecolor=color,
            linewidth=1.0,
        )
        ax.bar(xs, [r.get("pass", 0) for r in rows], width, color=color, label=label)
    ax.set_xticks(
        [x + width * (len(labels) - 1) / 2 for x in range(len(domains))],
        domains,
        rotation=30,
        ha="right",
    )
    ax.set_ylabel("goldens passed (outline: attempted)")
    ax.set_title("tasks verify per provider")
    ax.legend(frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_axisbelow(True)
    ax.grid(axis="y", color="#dddddd", linewidth=0.8)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out_path, format="png")
    plt.close(fig)
    return out_path
