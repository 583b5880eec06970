"""The reward-model accuracy report (`cua-rl eval-prm`) as Markdown and a PNG.

Pure renderers of the report dict `runtime/prm_accuracy.py` builds (its keys are
documented in docs/reward-model-accuracy.md); they compute nothing new, so the
JSON, the table and the figure always agree.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

COUNT_KEYS = (
    "steps",
    "trajectories",
    "labelled",
    "unlabelled",
    "ties",
    "votes",
    "unparseable_votes",
    "failed_requests",
    "label_failed_requests",
    "label_ties",
)


def percent(value: float | None) -> str:
    """A rate as `72.5%`, or `n/a` when there was nothing to count."""
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _labels_line(labels: dict[str, Any]) -> str:
    if labels["source"] == "judge":
        ident = labels["identity"]
        return (
            f"labelling judge {_who(ident)}, {ident['votes']} votes per step "
            f"(majority of the parseable votes; a tie gives no label)"
        )
    if labels["source"] == "stored":
        who = ", ".join(f"{name} ({n} trajectories)" for name, n in labels["labellers"].items())
        return f"stored `step_labels` rows: {who}"
    return "none (no labelling judge, no stored `step_labels`): process accuracy is n/a"


def _who(identity: dict[str, Any]) -> str:
    name = identity.get("served_name") or identity.get("model") or identity.get("url")
    return f"`{name}`"


def render_markdown(report: dict[str, Any]) -> str:
    judge = report["judge"]["identity"]
    overall = report["overall"]
    lines = [
        "# Reward-model accuracy",
        "",
        f"- run: `{report['run_dir']}` (run id `{report['run_id']}`)",
        f"- judged model: {_who(judge)}, {judge['votes']} votes per step at temperature "
        f"{judge['temperature']:g}, {judge['max_tokens']} tokens per vote",
        f"- labels: {_labels_line(report['labels'])}",
        f"- votes cached before this run: {report['judge']['cached_steps']} steps; "
        f"requests sent now: {report['judge']['requests']}",
        "",
        f"**Outcome accuracy {percent(overall['outcome_accuracy'])}** over "
        f"{overall['steps']} steps of {overall['trajectories']} trajectories; "
        f"**process accuracy {percent(overall['process_accuracy'])}** over "
        f"{overall['labelled']} labelled steps ({overall['unlabelled']} unlabelled).",
        "",
        "A step is right when the sign of the mean of its votes equals the target (the "
        "trajectory's verified outcome, or the step's label); a mean of 0 counts as wrong.",
        "",
        "| variant | task | outcome acc. | process acc. | " + " | ".join(COUNT_KEYS) + " |",
        "|---|---|---|---|" + "---|" * len(COUNT_KEYS),
    ]
    rows = [
        ("**all**", "", overall),
        *((v, row["task_id"], row) for v, row in report["variants"].items()),
    ]
    for name, task, row in rows:
        lines.append(
            f"| {name} | {task} | {percent(row['outcome_accuracy'])} | "
            f"{percent(row['process_accuracy'])} | "
            + " | ".join(str(row[k]) for k in COUNT_KEYS)
            + " |"
        )
    if overall.get("unreadable_screenshot"):
        lines += [
            "",
            f"{overall['unreadable_screenshot']} step(s) were not judged: their "
            "screenshot file is gone or does not decode.",
        ]
    skipped = report["skipped_trajectories"]
    if skipped:
        lines += [
            "",
            "Trajectories without a verified outcome, not counted: "
            + ", ".join(f"{n} {why}" for why, n in sorted(skipped.items()))
            + ".",
        ]
    if report["failures"]:
        lines += [
            "",
            f"## Lost steps ({report['failures_total']})",
            "",
            "| who | trajectory | step | reason |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| {f['who']} | {f['trajectory_id']} | {f['step_index']} | "
            f"{f['reason'].replace('|', '/')} |"
            for f in report["failures"]
        ]
    rejected = report["labels"].get("rejected_rows") or []
    if rejected:
        lines += ["", "## Stored label rows ignored", "", *(f"- {r}" for r in rejected)]
    return "\n".join(lines) + "\n"


def render_plot(report: dict[str, Any], out_path: Path) -> Path:
    """Outcome and process accuracy per task variant and overall, side by side."""
    import numpy as np

    from cua_rl.report.plots import BASE_COLOR, HIGHLIGHT_COLOR, new_figure, save_figure

    rows = {"all": report["overall"], **report["variants"]}
    names = list(rows)
    fig, ax = new_figure(width=max(6.0, 1.1 * len(names) + 2.0))
    x = np.arange(len(names))
    for offset, key, color, label in (
        (-0.2, "outcome_accuracy", BASE_COLOR, "outcome"),
        (0.2, "process_accuracy", HIGHLIGHT_COLOR, "process"),
    ):
        values = [rows[n][key] for n in names]
        heights = [100 * v if v is not None else 0.0 for v in values]
        bars = ax.bar(x + offset, heights, width=0.4, color=color, label=label)
        ax.bar_label(bars, labels=[percent(v) for v in values], padding=2, fontsize=7)
    ax.set_xticks(x, names, rotation=35, ha="right", fontsize=9)
    ax.set_ylim(0, 125)  # room for the value labels and the legend above 100%
    ax.set_ylabel("Accuracy (%)")
    ax.set_yticks(range(0, 101, 20))
    judge = report["judge"]["identity"]
    ax.set_title(
        f"Reward-model accuracy, {judge['votes']} votes per step "
        f"({report['overall']['steps']} steps)"
    )
    ax.legend(loc="upper left", ncols=2, fontsize=8, frameon=False)
    return save_figure(fig, out_path)
