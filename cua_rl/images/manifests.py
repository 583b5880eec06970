"""Which image a desktop runs and what is installed in it, read from the image
cache (`build.default_cache_dir`): the manifest `cua-rl image build` wrote beside
the image's files, found from a qcow2 path (its directory) or a docker tag
(`cua-rl-desktop:<content hash[:16]>` names one build; `cua-rl-desktop:<profile>`
names the profile). Nothing is started or built here. Stdlib only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cua_rl.images import recipe as rc
from cua_rl.images.docker import DOCKER_REPO


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def find_manifest(image: str | Path, cache: Path) -> dict[str, Any] | None:
    """The build manifest of `image` (a qcow2 path or a docker tag), or None when it
    is not one of ours or not in `cache`."""
    path = Path(image)
    if path.suffix == ".qcow2":
        return _read(path.parent / "manifest.json")
    repo, _, tag = str(image).partition(":")
    if repo != DOCKER_REPO or len(tag) != 16 or not all(c in "0123456789abcdef" for c in tag):
        return None
    found = sorted(cache.glob(f"{tag}*/manifest.json"))
    return _read(found[0]) if len(found) == 1 else None


def profile_of(image: str | Path, manifest: dict[str, Any] | None) -> rc.Profile | None:
    """The profile `image` was built from: its manifest's recipe, else a
    `cua-rl-desktop:<profile>` tag; None when neither says."""
    recipe = (manifest or {}).get("recipe")
    profile = recipe.get("profile") if isinstance(recipe, dict) else None
    if profile in ("minimal", "full"):
        return profile
    repo, _, tag = str(image).partition(":")
    if repo == DOCKER_REPO and tag in ("minimal", "full"):
        return tag  # type: ignore[return-value]  # the tag was checked against the Literal's values
    return None


def installed_packages(profile: rc.Profile, manifest: dict[str, Any] | None) -> frozenset[str]:
    """Every Debian package of the image: its manifest's resolved list, else the
    profile's package names (what the recipe asks for; their dependencies unknown)."""
    debian = (manifest or {}).get("debian")
    if isinstance(debian, dict) and debian:
        return frozenset(debian)
    return frozenset(rc.packages(profile))
