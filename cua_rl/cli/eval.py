"""`cua-rl eval`: the OSWorld evaluation protocol over a task set, resumable, with
manifest.json (what ran), a per-domain report (report.json, report.md, report.png)
and OSWorld's own results layout in the run directory (runtime/eval_like.py plans
it, runtime/evaluation_run.py runs it, runtime/telemetry/eval_progress.py shows its
progress)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from cua_rl.cli.options import OVERRIDES_HELP, load_run_config, reject_unknown_options, run_options
from cua_rl.command_output import emit_json
from cua_rl.report.eval_protocol import EVAL_PRESET

if TYPE_CHECKING:
    from cua_rl.config import RunConfig
    from cua_rl.runtime.eval_like import EvalPlan


@click.command("eval", context_settings={"ignore_unknown_options": True}, epilog=OVERRIDES_HELP)
@run_options(
    "Run directory (default: runs/eval-<time>); an evaluation already there "
    "is resumed: the task runs it scored are skipped."
)
@click.option(
    "--runs",
    type=click.IntRange(min=1),
    default=None,
    help="Runs of each task, averaged [default: 3; with --like, that run's].",
)
@click.option(
    "--preflight/--no-preflight",
    default=True,
    show_default=True,
    help="Skip (and report as unsupported) the tasks `cua-rl tasks check` says cannot run here.",
)
@click.option(
    "--like",
    "like",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="Run again what the evaluation in this run directory ran (its recorded "
    "config and runs; overrides apply on top) and name every difference in its "
    "manifest that cannot be reproduced (model files, code, image, tasks...). "
    "Scores are not expected to be bitwise equal, even with no difference.",
)
@click.option(
    "--full-hash",
    is_flag=True,
    help="Also hash every byte of the weights and of a VM disk image into "
    "manifest.json (the quick identity reads only headers and the image's ends).",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print what would run (the manifest's summary and, with --like, the "
    "differences; every process it would start: role, node, GPUs, command, "
    "environment) and start nothing.",
)
@click.option(
    "--nodes",
    metavar="SPEC",
    help="With --dry-run: the machines to lay the run out on, e.g. 1x8gpu (default: this machine).",
)
def eval_command(
    config: str | None,
    preset: str | None,
    out: Path | None,
    overrides: tuple[str, ...],
    as_json: bool,
    runs: int | None,
    preflight: bool,
    like: Path | None,
    full_hash: bool,
    dry_run: bool,
    nodes: str | None,
) -> None:
    """Evaluate a policy with the OSWorld protocol (50 steps, temperature 0, 5 s wait,
    3 runs averaged, no reward model) and write a per-domain report.

    Layers: the osworld-verified-eval preset (the protocol, the osworld-verified
    split, a 4096-token budget for Thinking models), then --preset, then CONFIG
    (desktops, model); then the protocol again, so neither can drop it (the values
    it replaces are named on stderr); then the flags and dotted overrides.
    Rerunning with the same --out skips the task runs already scored.
    --model RUN_DIR@VERSION evaluates the policy checkpoint a train run kept at that
    version (exported once to RUN_DIR/exports/models/; docs/run-directory.md).
    RUN_DIR gets manifest.json (what ran: model, agent, desktops' image, tasks,
    code), report.json/.md/.png (rates with 95 % intervals, pass@k) and
    osworld-results/ (OSWorld's own results layout).
    See docs/evaluate-your-model.md.
    """
    from rich.console import Console

    from cua_rl.errors import ConfigError, TaskFormatError
    from cua_rl.export.run_model import resolve_overrides
    from cua_rl.report.eval_markdown import render_counts
    from cua_rl.runtime.eval_like import plan_eval
    from cua_rl.runtime.run_dir import new_run_dir
    from cua_rl.runtime.run_launch import launch_eval
    from cua_rl.runtime.telemetry.eval_progress import ProgressBar

    overrides, resolved = resolve_overrides(overrides)  # --model RUN_DIR@VERSION
    for line in resolved:
        click.echo(f"eval: {line}", err=True)
    cfg = None
    if like is not None:
        if preset or (config and "=" not in config):
            raise click.UsageError(
                "--like runs the config recorded in its run directory: "
                "give no CONFIG or --preset (overrides apply on top)"
            )
        overrides = (config, *overrides) if config else overrides
        reject_unknown_options(overrides)
    else:
        cfg = _command_line_config(config, preset, overrides)
    run_dir = out or new_run_dir("eval")
    try:
        plan = plan_eval(cfg, run_dir, runs, like=like, overrides=overrides, full_hash=full_hash)
    except (ConfigError, TaskFormatError) as exc:
        raise click.ClickException(str(exc)) from exc
    for line in plan.lines():
        click.echo(line, err=True)
    if dry_run:
        _print_plan(plan, run_dir, as_json, nodes)
        return
    bar = ProgressBar(Console(stderr=True))
    try:
        with bar.progress:
            result = launch_eval(
                plan.cfg,
                run_dir,
                plan.runs,
                progress=bar,
                check=preflight,
                full_hash=full_hash,
                manifest=plan.manifest,
            )
    except (ConfigError, TaskFormatError) as exc:  # raised before anything starts
        raise click.ClickException(str(exc)) from exc
    except KeyboardInterrupt:
        click.echo(
            f"interrupted: scored task runs are kept in {run_dir}; "
            "run the same command again to finish the rest",
            err=True,
        )
        raise SystemExit(130) from None
    overall = result.report["overall"]
    summary = {
        "run_dir": str(run_dir),
        "task_runs": result.total,
        "done_before": result.done_before,
        "done_now": result.done_now,
        "missing": result.missing,
        "mean": overall["mean"],
        "rate_all": overall["rate_all"],
        "scored": overall["scored"],
        "setup_failed": overall["setup_failed"],
        "unsupported": overall["unsupported"],
        "interval_all": [overall["interval_all"]["low"], overall["interval_all"]["high"]],
        "report": [str(p) for p in result.report_files],
        **{k: round(v, 1) if isinstance(v, float) else v for k, v in result.counts.items()},
    }
    if as_json:
        scopes = ("tasks", "attempted", "scored", "setup_failed", "unsupported", "mean", "rate_all")
        summary["domains"] = {
            d: {k: row[k] for k in scopes} for d, row in result.report["domains"].items()
        }
        summary["pass_at_k"] = {
            k: v["pass_at_k"]["all"] for k, v in result.report["pass_k"].items()
        }
        emit_json(summary)
    else:  # the truthful counts per group and domain, then the one-line summary
        click.echo(render_counts(result.report))
        click.echo("  ".join(f"{k}={v}" for k, v in summary.items()))
    if result.missing:
        click.echo(
            f"{result.missing} task run(s) still missing (kept aborting or stopped by "
            "fleet.max_groups): run the same command again to do them",
            err=True,
        )


def _command_line_config(
    config: str | None, preset: str | None, overrides: tuple[str, ...]
) -> RunConfig:
    """The run config of CONFIG/--preset under the protocol; what the protocol
    replaced and each deviation from it are named on stderr."""
    from cua_rl.report.eval_protocol import deviations, protocol_overrides, replaced_values

    cfg = load_run_config(config, preset, overrides, under=EVAL_PRESET, fixed=protocol_overrides())
    replaced = replaced_values(preset, config)
    if replaced:
        click.echo("eval: the OSWorld protocol replaces " + ", ".join(replaced), err=True)
    deviating = deviations(overrides)
    if deviating:
        click.echo(
            "eval: NOT the OSWorld protocol (by override): " + ", ".join(deviating), err=True
        )
    return cfg


def _print_plan(plan: EvalPlan, run_dir: Path, as_json: bool, nodes: str | None) -> None:
    """`--dry-run`: the plan as JSON, or the manifest's summary; with the launch
    (runtime/launch_plan.py) either way."""
    from cua_rl.report.manifest.summary import summary_lines
    from cua_rl.runtime.launch_plan import dry_run, render_dry_run
    from cua_rl.runtime.node_spec import parse_nodes

    launch = dry_run(plan.cfg, parse_nodes(nodes) if nodes else None, training=False)
    if as_json:
        emit_json({"run_dir": str(run_dir), **plan.as_dict(), "launch": launch})
        return
    click.echo("\n".join(summary_lines(plan.manifest)))
    click.echo(render_dry_run(launch), nl=False)
    click.echo(f"(dry run: nothing started; {plan.runs} run(s) per task into {run_dir})")
