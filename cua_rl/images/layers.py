"""The two layers of an image's root file system.

The base (mmdebstrap, the user, the guest's pinned Python closure) takes
minutes and changes only with the package list, the pins or the recipe
version, so it is cached on its own under `base/<base key>/`. The top layer
(the guest package, the session script, the desktop's own commands, the
manifest) is staged in a small tree and appended to a copy of the base tar:
seconds. Top-layer paths are new paths (`/opt/cua-guest/guest`, `/etc/cua-image`,
`/usr/local/bin/cua-desktop`, `/usr/local/lib/cua-rl`),
so the combined tar never holds two versions of one file.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cua_rl.errors import DesktopError
from cua_rl.images import recipe as rc

TOP_PATHS = (
    rc.MANIFEST_IN_IMAGE.rsplit("/", 1)[0],
    rc.GUEST_IN_IMAGE,
    rc.SESSION_SCRIPT_IN_IMAGE,
    rc.BIN_IN_IMAGE.rsplit("/", 1)[0],
)
"""What the top layer adds (directories are added whole, their parents are the base's)."""


@dataclass(frozen=True)
class Base:
    """A cached base layer: its tar and the Debian versions resolved in it."""

    key: str
    dir: Path
    debian: dict[str, str]
    build_s: float
    built_now: bool

    @property
    def rootfs_tar(self) -> Path:
        return self.dir / "rootfs.tar"


def _load(dir: Path, key: str) -> Base | None:
    """The base at `dir`, or None when absent or unfinished (debian.json comes last)."""
    try:
        meta = json.loads((dir / "debian.json").read_text())
        debian, build_s = meta["debian"], float(meta["build_s"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(debian, dict) or not (dir / "rootfs.tar").is_file():
        return None
    return Base(key, dir, debian, build_s, built_now=False)


def base_layer(
    recipe: rc.Recipe,
    cache: Path,
    refresh: bool,
    build: Callable[[rc.Recipe, Path], dict[str, str]],
) -> Base:
    """The cached base of `recipe`, built with `build(recipe, out_dir)` (which
    writes out_dir/rootfs.tar and returns the resolved Debian versions) when
    missing or when `refresh`."""
    key = recipe.base_key()
    final = cache / "base" / key
    if not refresh and (found := _load(final, key)) is not None:
        return found
    began = time.monotonic()
    final.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=final.parent, prefix="building-") as tmp:
        out = Path(tmp) / "layer"
        out.mkdir()
        debian = build(recipe, out)
        build_s = round(time.monotonic() - began, 1)
        (out / "debian.json").write_text(
            json.dumps(
                {
                    "base_key": key,
                    "recipe": {
                        "suite": recipe.suite,
                        "packages": recipe.packages,
                        "python": recipe.python,
                        "version": recipe.version,
                    },
                    "debian": debian,
                    "build_s": build_s,
                },
                indent=1,
            )
        )
        if final.exists():
            shutil.rmtree(final)
        out.rename(final)
    return Base(key, final, debian, build_s, built_now=True)


def append_top(base_tar: Path, stage: Path, out_tar: Path) -> None:
    """out_tar = base_tar + the top-layer paths of `stage` (root-owned, mtime 0,
    sorted: the same stage gives the same bytes)."""
    missing = [p for p in TOP_PATHS if not (stage / p.lstrip("/")).exists()]
    if missing:
        raise DesktopError(f"image build: the top layer lacks {', '.join(missing)}")
    shutil.copyfile(base_tar, out_tar)
    argv = [
        "tar",
        "--append",
        "--format=gnu",
        "--file",
        str(out_tar),
        "--sort=name",
        "--numeric-owner",
        "--owner=0",
        "--group=0",
        "--mtime=@0",
        "-C",
        str(stage),
        *(f".{p}" for p in TOP_PATHS),
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise DesktopError(
            f"image build: appending the top layer to {out_tar} failed "
            f"(exit {proc.returncode}): {proc.stderr.strip()[-1000:]}"
        )
