"""Build a desktop image from a `Recipe`: a cached base layer (mmdebstrap, the
user, the Python closure; see `layers`) plus a top layer with the guest, the
session script and the manifest, then the requested format.

Images are cached under `~/.cache/cua-rl/images/<content hash>/`, where the
content hash covers the whole recipe (guest and script digests included) and
every resolved package version (the manifest). `by-recipe/<recipe key>` points
at the content hash of the last build of a recipe, so an unchanged recipe is
never rebuilt; bases live in `base/<base key>/` (`refresh=True` rebuilds both).

The base layer's steps (mmdebstrap, the user, code-server, the Python closure) and
the step runner are in base_build.py.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from cua_rl.images import desktop_files, layers
from cua_rl.images import recipe as rc
from cua_rl.images.base_build import build_base, run_step
from cua_rl.images.docker import docker_import
from cua_rl.images.qcow2 import make_qcow2

log = logging.getLogger(__name__)


def default_cache_dir() -> Path:
    env = os.environ.get("CUA_RL_IMAGE_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "cua-rl" / "images"


@dataclass(frozen=True)
class BuiltImage:
    """A built image: where its files are and what it is."""

    content_hash: str
    dir: Path
    manifest: dict
    docker_tag: str | None = None
    cached: bool = False

    @property
    def rootfs_tar(self) -> Path:
        return self.dir / "rootfs.tar"

    @property
    def qcow2(self) -> Path:
        return self.dir / "disk.qcow2"

    @property
    def kernel(self) -> Path:
        return self.dir / "vmlinuz"

    @property
    def initrd(self) -> Path:
        return self.dir / "initrd.img"


def _compile_guest(stage: Path) -> None:
    """Hash-checked pycs for the guest (top layer) when this interpreter is the
    image's minor version (its pyc format); else the guest compiles at start."""
    if sys.version_info[:2] != (3, 11):
        log.warning(
            "image build: host Python %d.%d is not the image's 3.11: the guest "
            "is not byte-compiled",
            *sys.version_info[:2],
        )
        return
    import compileall
    import py_compile

    compileall.compile_dir(
        stage / rc.GUEST_IN_IMAGE.lstrip("/"),
        quiet=2,
        force=True,
        invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH,
    )


def _install_guest(stage: Path) -> None:
    """The guest itself, non-editable, into /opt/cua-guest/guest (top layer)."""
    target = stage / rc.GUEST_IN_IMAGE.lstrip("/")
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:  # build from a copy: no build/ in the checkout
        src = Path(tmp) / "guest"
        shutil.copytree(
            rc.guest_source_dir(),
            src,
            ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"),
        )
        run_step(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-deps",
                "--no-build-isolation",
                "--no-compile",
                "--no-index",
                "--target",
                str(target),
                str(src),
            ],
            "pip install of the guest",
        )


def _install_session(stage: Path, recipe: rc.Recipe) -> None:
    """The session script and the desktop's own commands (`desktop_files.stage_bin`)."""
    script = stage / rc.SESSION_SCRIPT_IN_IMAGE.lstrip("/")
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(rc.session_script())
    script.chmod(0o755)
    desktop_files.stage_bin(stage, recipe.packages, bool(recipe.code_server))


def content_hash(recipe_key: str, debian: dict[str, str], python: dict[str, str]) -> str:
    blob = json.dumps(
        {"recipe": recipe_key, "debian": debian, "python": python}, sort_keys=True
    ).encode()
    return hashlib.sha256(blob).hexdigest()


def _lookup(cache: Path, key: str) -> BuiltImage | None:
    link = cache / "by-recipe" / key
    try:
        content = link.read_text().strip()
        manifest = json.loads((cache / content / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    return BuiltImage(content, cache / content, manifest, cached=True)


def _mark_used(path: Path) -> None:
    """The image dir's mtime is its last use: `image prune` keeps what a checkout
    on this machine used lately, even when its recipe is not this checkout's."""
    try:
        os.utime(path)
    except OSError:
        pass


def build_image(
    profile: rc.Profile = "full",
    fmt: rc.Format = "docker",
    cache: Path | None = None,
    refresh: bool = False,
) -> BuiltImage:
    """Build (or find in the cache) the image of `profile` in format `fmt`.

    `refresh` rebuilds both layers; otherwise a cached base is reused and only
    the top layer (guest, session script, manifest) is built when it changed."""
    cache = cache or default_cache_dir()
    recipe = rc.Recipe.for_profile(profile)
    key = recipe.key()
    image = None if refresh else _lookup(cache, key)
    if image is None or not image.rootfs_tar.is_file():
        base = layers.base_layer(
            recipe, cache, refresh, lambda r, out: build_base(r, out, cache, refresh)
        )
        image = _build_image(recipe, key, base, cache)
    _mark_used(image.dir)
    if fmt == "qcow2" and not image.qcow2.is_file():
        make_qcow2(image.rootfs_tar, image.dir)
    if fmt == "docker":
        tag = docker_import(image.rootfs_tar, image.content_hash, profile)
        image = BuiltImage(
            image.content_hash, image.dir, image.manifest, docker_tag=tag, cached=image.cached
        )
    return image


def _build_image(recipe: rc.Recipe, key: str, base: layers.Base, cache: Path) -> BuiltImage:
    """The top layer (guest, session script, manifest) appended to a copy of the base."""
    began = time.monotonic()
    with tempfile.TemporaryDirectory(dir=cache, prefix="build-") as tmp:
        stage = Path(tmp) / "top"
        _install_session(stage, recipe)
        _install_guest(stage)
        _compile_guest(stage)
        content = content_hash(key, base.debian, recipe.python)
        manifest = {
            "content_hash": content,
            "recipe_key": key,
            "base_key": base.key,
            "recipe": asdict(recipe),
            "debian": base.debian,
            "python": recipe.python,
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "base_build_s": base.build_s,
        }
        mpath = stage / rc.MANIFEST_IN_IMAGE.lstrip("/")
        mpath.parent.mkdir(parents=True, exist_ok=True)
        mpath.write_text(json.dumps(manifest, indent=1))
        out = Path(tmp) / content
        out.mkdir()
        layers.append_top(base.rootfs_tar, stage, out / "rootfs.tar")
        manifest["top_build_s"] = round(time.monotonic() - began, 1)
        # what this call spent: the top layer, plus the base when it was built now
        manifest["build_s"] = round(
            manifest["top_build_s"] + (base.build_s if base.built_now else 0.0), 1
        )
        (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
        final = cache / content
        if final.exists():
            shutil.rmtree(final)
        out.rename(final)
    (cache / "by-recipe").mkdir(exist_ok=True)
    (cache / "by-recipe" / key).write_text(content + "\n")
    return BuiltImage(content, final, manifest)
