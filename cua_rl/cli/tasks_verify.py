"""`cua-rl tasks verify`: prove OSWorld tasks end to end on a provider's desktops
(cua_rl/tasks/verify.py says what is proven; verify_desktops.py which desktops)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from cua_rl.command_output import emit_json
from cua_rl.desktop.file_cache import FileCache, default_cache_root
from cua_rl.errors import TaskFormatError
from cua_rl.tasks.sources import load_source
from cua_rl.tasks.verify import GOLDEN_ROOT
from cua_rl.tasks.verify_desktops import VERIFY_PROVIDERS


@click.command("verify")
@click.option(
    "--osworld",
    "osworld",
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="OSWorld checkout (or its evaluation_examples).",
)
@click.option("--split", default=None, help="Verify only this split's tasks.")
@click.option("--task", "task_ids", multiple=True, help="Verify only this task id (repeatable).")
@click.option(
    "--provider",
    type=click.Choice(VERIFY_PROVIDERS),
    default="local",
    show_default=True,
    help="Whose desktops: local ones, or this project's image as containers or "
    "VMs (built once, cached; qemu under TCG is slow: use --task).",
)
@click.option(
    "--image",
    default=None,
    help="container: a docker tag; qemu: a qcow2 disk [default: this project's "
    "image of --profile, built when missing].",
)
@click.option(
    "--profile",
    type=click.Choice(["minimal", "full"]),
    default="full",
    show_default=True,
    help="The image profile for container and qemu desktops.",
)
@click.option(
    "--desktops",
    type=click.IntRange(1, 8),
    default=1,
    show_default=True,
    help="Desktops run in parallel.",
)
@click.option(
    "--job-timeout",
    type=click.FloatRange(min=10),
    default=None,
    help="Seconds one job (reset, setup, golden, scoring) may take, a golden step "
    "a quarter of it [default: 240; qemu 900].",
)
@click.option(
    "--cache",
    "cache_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Asset cache root [default: $CUA_RL_CACHE_DIR or ~/.cache/cua-rl/files].",
)
@click.option(
    "--golden-root",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=GOLDEN_ROOT,
    show_default=True,
    help="Folder holding golden/<domain>/<task id>.json.",
)
@click.option(
    "--real-assets",
    is_flag=True,
    help="The cache holds the task set's real assets, not stand-ins: also attempt "
    "tasks judged against a gold file and those listed in the golden root's "
    "needs_real_assets.json.",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("verify-report"),
    show_default=True,
    help="Where verify.jsonl (resumable), verify.json and verify.md go (one folder per provider).",
)
@click.option("--fresh", is_flag=True, help="Forget the verdicts of an earlier run in --out.")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON summary only.")
def verify_tasks(
    osworld: Path,
    split: str | None,
    task_ids: tuple[str, ...],
    provider: str,
    image: str | None,
    profile: str,
    desktops: int,
    job_timeout: float | None,
    cache_dir: Path | None,
    golden_root: Path,
    real_assets: bool,
    out_dir: Path,
    fresh: bool,
    as_json: bool,
) -> None:
    """Per task, on fresh desktops of PROVIDER: setup + golden solution must score 1,
    setup + nothing must score 0 (infeasible tasks: a declared failure scores 1).
    Resumable."""
    from cua_rl.tasks.verify import Ledger
    from cua_rl.tasks.verify_desktops import JOB_TIMEOUT_S, verify_desktops
    from cua_rl.tasks.verify_run import plan_run, run_plan, write_report

    try:
        load = load_source(f"osworld:{osworld}", split)
        ledger = Ledger(out_dir, fresh=fresh)
    except TaskFormatError as exc:
        raise click.ClickException(str(exc)) from exc
    chosen = load.tasks
    if task_ids:
        unknown = sorted(set(task_ids) - {t.task_id for t in chosen})
        if unknown:
            raise click.BadParameter(f"not in {osworld}: {', '.join(unknown)}", param_hint="--task")
        chosen = [t for t in chosen if t.task_id in set(task_ids)]
    if provider != "local" and image is None and not as_json:
        click.echo(
            f"verify: this project's {profile} image for {provider} desktops (built "
            "once when missing, then cached)",
            err=True,
        )
    where = verify_desktops(provider, image, profile)  # type: ignore[arg-type]  # click.Choice gives one of the Literal's values
    cache = FileCache(cache_dir or default_cache_root())
    try:
        todo, plan = plan_run(
            chosen, load.unimplemented, ledger, cache, golden_root, real_assets, where.host
        )
    except TaskFormatError as exc:
        raise click.ClickException(str(exc)) from exc
    if not as_json:
        click.echo(
            f"verify: {len(chosen)} task(s), {len(chosen) - len(todo)} already settled "
            f"in {ledger.path}, {len(plan.pending)} to run on {desktops} {provider} "
            f"desktop(s) ({where.image})",
            err=True,
        )
    began = time.monotonic()
    run_plan(
        plan,
        ledger,
        desktops,
        cache.root,
        on_progress=None if as_json else lambda line: click.echo(line, err=True),
        provider_config=where.config,
        job_timeout_s=job_timeout or JOB_TIMEOUT_S[provider],
    )
    summary, verdicts = write_report(
        chosen,
        ledger,
        out_dir,
        time.monotonic() - began,
        {"provider": provider, "image": where.image},
    )
    if as_json:
        emit_json(summary)
        return
    for verdict in sorted(verdicts, key=lambda v: (v.domain, v.task_id)):
        if verdict.status in ("fail_golden", "fail_untouched", "error") or not verdict.ok:
            click.echo(verdict.line())
    click.echo(
        f"verify: {summary['passed']}/{summary['attempted']} attempted pass, "
        f"statuses {json.dumps(summary['statuses'])}; report {out_dir / 'verify.md'}",
        err=True,
    )


@click.command("parity")
@click.argument(
    "runs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path)
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("parity-report"),
    show_default=True,
    help="Where parity.md, parity.json and parity.png go.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
def parity_tasks(runs: tuple[Path, ...], out_dir: Path, as_json: bool) -> None:
    """Compare `tasks verify` runs of several providers (their --out folders; the first
    is the reference): goldens passed per domain and provider, and every task whose
    verdict differs. Exit 1 when a task passing on the reference fails elsewhere."""
    from cua_rl.tasks.verify_parity import compare, load_run, markdown, plot

    try:
        result = compare([load_run(folder) for folder in runs])
    except TaskFormatError as exc:
        raise click.ClickException(str(exc)) from exc
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "parity.json").write_text(json.dumps(result, indent=1) + "\n")
    (out_dir / "parity.md").write_text(markdown(result))
    plot(result, out_dir / "parity.png")
    if as_json:
        emit_json(result)
    else:
        click.echo(markdown(result), nl=False)
        click.echo(f"parity: report {out_dir / 'parity.md'}, {out_dir / 'parity.png'}", err=True)
    if result["passing_on_reference_only"]:
        raise SystemExit(1)
