"""`cua-rl image build`: build (or find in the cache) a desktop image."""

from __future__ import annotations

from pathlib import Path

import click

from cua_rl.command_output import emit_json


@click.group()
def image() -> None:
    """Desktop images built from Debian packages (container and qemu providers)."""


@image.command("build")
@click.option("--format", "fmt", type=click.Choice(["docker", "qcow2", "rootfs"]),
              default="docker", show_default=True,
              help="docker: an engine image tagged cua-rl-desktop:PROFILE; qcow2: a disk + "
              "kernel for the qemu provider; rootfs: the tar only.")
@click.option("--profile", type=click.Choice(["minimal", "full"]), default="full",
              show_default=True,
              help="full: the task suite's apps; minimal: X, window manager, guest, xterm.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Image cache dir (default $CUA_RL_IMAGE_CACHE or ~/.cache/cua-rl/images).")
@click.option("--refresh", is_flag=True, help="Rebuild both layers (base, top) even when cached.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def build(fmt: str, profile: str, out: Path | None, refresh: bool, as_json: bool) -> None:
    """Build one desktop image with mmdebstrap (needs root or unprivileged user
    namespaces, and network access to the Debian archive and PyPI)."""
    from cua_rl.images.build import build_image

    built = build_image(profile, fmt, cache=out, refresh=refresh)  # type: ignore[arg-type]
    result = {"content_hash": built.content_hash, "dir": str(built.dir),
              "format": fmt, "profile": profile, "cached": built.cached,
              "build_s": built.manifest.get("build_s"),
              "packages": len(built.manifest.get("debian", {}))}
    if built.docker_tag:
        result["docker_tag"] = built.docker_tag
    if fmt == "qcow2":
        result.update(qcow2=str(built.qcow2), kernel=str(built.kernel),
                      initrd=str(built.initrd))
    if as_json:
        emit_json(result)
    else:
        for key, value in result.items():
            click.echo(f"{key}: {value}")
