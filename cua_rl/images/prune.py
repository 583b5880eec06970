"""Remove the desktop images the cache no longer needs (`cua-rl image prune`).

Every edit of the guest, the session script or a package list builds a new
image (1-6 GB with its qcow2) beside the old ones, and nothing else deletes
them: a machine that follows `main` for a few weeks fills its disk with images
no recipe names any more. Pruning keeps:

- the image each profile's recipe of this checkout would use now
  (`by-recipe/<Recipe.key()>`), so the next desktop starts without a build;
- the `keep` newest images of each profile (the manifest's `built_at`), for
  another checkout on the same machine;
- every image used within `unused_for_s` (a day by default: `build_image`
  marks an image dir used each time it hands it out), so another checkout's
  current image stays while that checkout is in use;
- every image a live process names on its command line (a QEMU booted from its
  kernel), whatever its age;
- the bases and code-server builds a kept image was made from.

It removes the rest, `by-recipe` links to what it removed, the docker tags
`cua-rl-desktop:<hash[:16]>` of removed images (docker refuses a tag a
container still runs from; that is reported, not forced), and what interrupted
builds left (`build-*`, `building-*`) once older than `STALE_BUILD_S`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import get_args

import psutil

from cua_rl.images import recipe as rc
from cua_rl.images.docker import docker_tag

DAY_S = 86400.0
STALE_BUILD_S = 6 * 3600.0
"""A temporary build dir older than this is a leftover: a build step times out
after an hour (`base_build.BUILD_TIMEOUT_S`), and a whole cold build takes minutes."""
HASH_DIR = re.compile(r"^[0-9a-f]{64}$")
BUILD_LEFTOVER = re.compile(r"^(build|building)-")


@dataclass(frozen=True)
class CachedImage:
    """One image directory of the cache, as its manifest describes it."""

    content_hash: str
    dir: Path
    profile: str
    built_at: str
    base_key: str
    code_server: str
    size: int
    used_at: float
    """The dir's mtime: `build_image` touches it whenever it hands the image out."""


@dataclass
class PrunePlan:
    """What a prune keeps and removes; `apply_prune` carries it out."""

    cache: Path
    keep: list[CachedImage] = field(default_factory=list)
    remove: list[CachedImage] = field(default_factory=list)
    in_use: list[CachedImage] = field(default_factory=list)
    """Kept only because a live process uses them (also in `keep`)."""
    recent: list[CachedImage] = field(default_factory=list)
    """Kept only because they were used lately (also in `keep`)."""
    other: list[Path] = field(default_factory=list)
    """Bases, code-server builds, broken image dirs and build leftovers to remove."""

    @property
    def freed_bytes(self) -> int:
        return sum(i.size for i in self.remove) + sum(_size(p) for p in self.other)


def _size(path: Path) -> int:
    """Bytes on disk under `path` (files counted once, links not followed)."""
    if path.is_file() or path.is_symlink():
        return path.lstat().st_blocks * 512
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                continue
    return total


def _read_image(path: Path) -> CachedImage | None:
    """The image at `path`, or None when its manifest is missing or unreadable
    (such a dir is never used: the build renames it into place complete)."""
    try:
        manifest = json.loads((path / "manifest.json").read_text())
        recipe = manifest["recipe"]
        return CachedImage(
            content_hash=path.name,
            dir=path,
            profile=str(recipe["profile"]),
            built_at=str(manifest.get("built_at", "")),
            base_key=str(manifest.get("base_key", "")),
            code_server=str(recipe.get("code_server", "")),
            size=_size(path),
            used_at=path.stat().st_mtime,
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def current_hashes(cache: Path) -> set[str]:
    """The content hashes `by-recipe` names for this checkout's recipes."""
    names = set()
    for profile in get_args(rc.Profile):
        link = cache / "by-recipe" / rc.Recipe.for_profile(profile).key()
        try:
            names.add(link.read_text().strip())
        except OSError:
            continue
    return names


def paths_in_use(cache: Path) -> set[str]:
    """The image dirs a live process names in its command line (QEMU's -kernel,
    -initrd, or an explicitly given disk)."""
    prefix = str(cache.resolve()) + os.sep
    used = set()
    for proc in psutil.process_iter(["cmdline"]):
        for arg in proc.info.get("cmdline") or ():
            at = arg.find(prefix)
            if at >= 0:
                used.add(arg[at + len(prefix) :].split(os.sep, 1)[0].split(",", 1)[0])
    return used


def plan_prune(
    cache: Path,
    keep: int = 1,
    unused_for_s: float = DAY_S,
    now: float | None = None,
    in_use: Callable[[Path], set[str]] = paths_in_use,
    current: Callable[[Path], set[str]] = current_hashes,
) -> PrunePlan:
    """Decide what to remove from `cache` (nothing is touched here): an image goes
    when it is none of the `keep` newest of its profile, not what this checkout's
    recipes name, not used within `unused_for_s` and named by no live process."""
    if keep < 0 or unused_for_s < 0:
        raise ValueError(f"keep and unused_for_s must be 0 or more, got {keep}, {unused_for_s}")
    now = time.time() if now is None else now
    plan = PrunePlan(cache)
    if not cache.is_dir():
        return plan
    images: list[CachedImage] = []
    for path in sorted(cache.iterdir()):
        if path.is_dir() and HASH_DIR.match(path.name):
            image = _read_image(path)
            if image is None:
                plan.other.append(path)
            else:
                images.append(image)
    wanted, used = current(cache), in_use(cache)
    newest: dict[str, int] = {}
    for image in sorted(images, key=lambda i: i.built_at, reverse=True):
        rank = newest[image.profile] = newest.get(image.profile, 0) + 1
        if image.content_hash in wanted or rank <= keep:
            plan.keep.append(image)
        elif image.content_hash in used:
            plan.keep.append(image)
            plan.in_use.append(image)
        elif now - image.used_at < unused_for_s:
            plan.keep.append(image)
            plan.recent.append(image)
        else:
            plan.remove.append(image)
    plan.other += _unreferenced(cache / "base", {i.base_key for i in plan.keep}, now)
    plan.other += _unreferenced(cache / "code-server", {i.code_server for i in plan.keep}, now)
    plan.other += _leftovers([cache], now)
    return plan


def _unreferenced(parent: Path, kept: set[str], now: float) -> list[Path]:
    """Entries of `parent` no kept image names, and its stale build leftovers."""
    if not parent.is_dir():
        return []
    out = [
        p
        for p in sorted(parent.iterdir())
        if not BUILD_LEFTOVER.match(p.name) and p.name not in kept
    ]
    return out + _leftovers([parent], now)


def _leftovers(parents: Iterable[Path], now: float) -> list[Path]:
    out = []
    for parent in parents:
        for path in sorted(parent.iterdir()):
            if BUILD_LEFTOVER.match(path.name) and now - path.lstat().st_mtime > STALE_BUILD_S:
                out.append(path)
    return out


@dataclass
class PruneResult:
    """What `apply_prune` did: removed dirs, freed bytes, docker tags it could not remove."""

    removed: list[Path] = field(default_factory=list)
    freed_bytes: int = 0
    docker_removed: list[str] = field(default_factory=list)
    docker_refused: dict[str, str] = field(default_factory=dict)


def apply_prune(plan: PrunePlan, docker: bool = True) -> PruneResult:
    """Remove what `plan` names: docker tags first (a refused tag keeps nothing
    from being freed on disk: the engine holds its own copy), then the dirs,
    then `by-recipe` links that name a removed image."""
    result = PruneResult()
    if docker and shutil.which("docker"):
        for image in plan.remove:
            _remove_docker_tag(docker_tag(image.content_hash), result)
    gone = {i.content_hash for i in plan.remove}
    sized = [(i.dir, i.size) for i in plan.remove] + [(p, _size(p)) for p in plan.other]
    for path, size in sized:  # an image's size was read with its manifest
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        if not path.exists():
            result.removed.append(path)
            result.freed_bytes += size
    links = plan.cache / "by-recipe"
    for link in sorted(links.iterdir()) if links.is_dir() else ():
        try:
            if link.read_text().strip() in gone:
                link.unlink()
        except OSError:
            continue
    return result


def _remove_docker_tag(tag: str, result: PruneResult) -> None:
    try:
        proc = subprocess.run(
            ["docker", "image", "rm", tag], capture_output=True, text=True, timeout=120
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        result.docker_refused[tag] = str(exc)
        return
    if proc.returncode == 0:
        result.docker_removed.append(tag)
    elif "No such image" not in proc.stderr:
        result.docker_refused[tag] = (
            proc.stderr.strip().splitlines()[-1]
            if proc.stderr.strip()
            else f"exit {proc.returncode}"
        )
