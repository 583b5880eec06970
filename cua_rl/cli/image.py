"""`cua-rl image build` and `image prune`: build (or find in the cache) a desktop
image, and remove the cached ones nothing needs."""

from __future__ import annotations

from pathlib import Path

import click

from cua_rl.command_output import emit_json

CACHE_DIR = click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Image cache dir (default $CUA_RL_IMAGE_CACHE or ~/.cache/cua-rl/images).",
)


@click.group()
def image() -> None:
    """Desktop images built from Debian packages (container and qemu providers)."""


@image.command("build")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["docker", "qcow2", "rootfs"]),
    default="docker",
    show_default=True,
    help="docker: an engine image tagged cua-rl-desktop:PROFILE; qcow2: a disk + "
    "kernel for the qemu provider; rootfs: the tar only.",
)
@click.option(
    "--profile",
    type=click.Choice(["minimal", "full"]),
    default="full",
    show_default=True,
    help="full: the task suite's apps; minimal: X, window manager, guest, xterm.",
)
@CACHE_DIR
@click.option("--refresh", is_flag=True, help="Rebuild both layers (base, top) even when cached.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def build(fmt: str, profile: str, out: Path | None, refresh: bool, as_json: bool) -> None:
    """Build one desktop image with mmdebstrap (needs root or unprivileged user
    namespaces, and network access to the Debian archive and PyPI)."""
    from cua_rl.images.build import build_image

    built = build_image(profile, fmt, cache=out, refresh=refresh)  # type: ignore[arg-type]  # click.Choice gives one of the Literal's values
    result = {
        "content_hash": built.content_hash,
        "dir": str(built.dir),
        "format": fmt,
        "profile": profile,
        "cached": built.cached,
        "build_s": built.manifest.get("build_s"),
        "packages": len(built.manifest.get("debian", {})),
    }
    if built.docker_tag:
        result["docker_tag"] = built.docker_tag
    if fmt == "qcow2":
        result.update(qcow2=str(built.qcow2), kernel=str(built.kernel), initrd=str(built.initrd))
    if as_json:
        emit_json(result)
    else:
        for key, value in result.items():
            click.echo(f"{key}: {value}")


@image.command("prune")
@click.option(
    "--keep",
    type=click.IntRange(min=0),
    default=1,
    show_default=True,
    help="Newest images kept per profile, beside the ones this checkout's recipes name "
    "and the ones a running VM uses.",
)
@CACHE_DIR
@click.option(
    "--unused-hours",
    type=click.FloatRange(min=0),
    default=24.0,
    show_default=True,
    help="Keep images used within this many hours (another checkout's current one).",
)
@click.option("--dry-run", is_flag=True, help="Print what would be removed; remove nothing.")
@click.option("--no-docker", is_flag=True, help="Leave the docker engine's tags alone.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def prune(
    keep: int, out: Path | None, unused_hours: float, dry_run: bool, no_docker: bool, as_json: bool
) -> None:
    """Remove cached images no recipe of this checkout names, older than the --keep
    newest of their profile, with the bases and docker tags only they used."""
    from cua_rl.images.build import default_cache_dir
    from cua_rl.images.prune import apply_prune, plan_prune

    plan = plan_prune(out or default_cache_dir(), keep=keep, unused_for_s=unused_hours * 3600)
    result = None if dry_run else apply_prune(plan, docker=not no_docker)
    would_remove = [str(i.dir) for i in plan.remove] + [str(p) for p in plan.other]
    removed = [str(p) for p in result.removed] if result else []
    freed_gb = round((result.freed_bytes if result else plan.freed_bytes) / 2**30, 2)
    refused = result.docker_refused if result else {}
    if as_json:
        summary: dict[str, object] = {
            "cache": str(plan.cache),
            "dry_run": dry_run,
            "kept": [i.content_hash for i in plan.keep],
            "kept_in_use": [i.content_hash for i in plan.in_use],
            "kept_recent": [i.content_hash for i in plan.recent],
            "removed": removed,
            "would_remove": would_remove,
            "freed_gb": freed_gb,
        }
        if result:
            summary.update(docker_removed=result.docker_removed, docker_refused=refused)
        emit_json(summary)
        return
    verb = "would remove" if dry_run else "removed"
    for path in would_remove if dry_run else removed:
        click.echo(f"{verb}: {path}")
    for tag, why in refused.items():
        click.echo(f"docker kept {tag}: {why}", err=True)
    click.echo(
        f"kept {len(plan.keep)} image(s) ({len(plan.in_use)} in use, {len(plan.recent)} "
        f"used lately), {verb} "
        f"{len(plan.remove)} image(s) and {len(plan.other)} other dir(s): {freed_gb} GB",
        err=True,
    )
