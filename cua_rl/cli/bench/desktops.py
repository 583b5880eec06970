"""`cua-rl bench desktops`: start/reset/screenshot times and memory per desktop,
per provider; the measuring is `cua_rl.bench.desktops`, this module
parses the flags and prints the JSON."""

from __future__ import annotations

import click

from cua_rl.bench.desktops import ALL_PROVIDERS, measure
from cua_rl.command_output import emit_json


def parse_providers(text: str) -> list[str]:
    """`--provider local, qemu,local` -> ["local", "qemu"]: a comma list in the order
    given, each once. An unknown or missing name is one usage error naming the
    valid ones, before any desktop starts (a typo must not cost a 3-minute boot)."""
    names = list(dict.fromkeys(p.strip() for p in text.split(",") if p.strip()))
    unknown = [n for n in names if n not in ALL_PROVIDERS]
    if unknown or not names:
        what = f"unknown provider(s) {', '.join(unknown)}" if unknown else "no provider"
        raise click.BadParameter(f"{what}; expected a comma list of {', '.join(ALL_PROVIDERS)}",
                                 param_hint="--provider")
    return names


@click.command(name="desktops")
@click.option("--provider", "providers", default=",".join(ALL_PROVIDERS), show_default=True,
              help="Comma list of providers to measure.")
@click.option("--calls", type=click.IntRange(min=5), default=50, show_default=True,
              help="Screenshots per figure.")
@click.option("--max-limit", type=click.IntRange(min=0, max=64), default=8, show_default=True,
              help="Largest number of local desktops tried for max_desktops (0: skip; "
              "skipped too when --provider has no `local`).")
@click.option("--container-image", default="cua-rl-desktop:full", show_default=True,
              help="Image of the container desktops (`cua-rl image build --format docker`).")
@click.option("--qemu-image", type=click.Path(dir_okay=False), default=None,
              help="disk.qcow2 of `cua-rl image build --format qcow2` (default: the "
              "provider's configured image).")
@click.option("--qemu-memory-mb", type=click.IntRange(min=512), default=1024, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def bench_desktops(providers: str, calls: int, max_limit: int, container_image: str,
                   qemu_image: str | None, qemu_memory_mb: int, as_json: bool) -> None:
    """Start/reset/screenshot times and memory per desktop, per provider.

    The reset is each provider's default: for qemu the snapshot restore; qemu also
    reports `reboot_reset_s`, a reset by reboot (one more VM boot)."""
    names = parse_providers(providers)
    emit_json(measure(names, calls, max_limit, container_image, qemu_image, qemu_memory_mb))
