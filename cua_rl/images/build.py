"""Build a desktop image from a `Recipe`: a cached base layer (mmdebstrap, the
user, the Python closure; see `layers`) plus a top layer with the guest, the
session script and the manifest, then the requested format.

Images are cached under `~/.cache/cua-rl/images/<content hash>/`, where the
content hash covers the whole recipe (guest and script digests included) and
every resolved package version (the manifest). `by-recipe/<recipe key>` points
at the content hash of the last build of a recipe, so an unchanged recipe is
never rebuilt; bases live in `base/<base key>/` (`refresh=True` rebuilds both).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from cua_rl.errors import DesktopError
from cua_rl.images import layers
from cua_rl.images import recipe as rc
from cua_rl.images.default_apps import default_apps_list
from cua_rl.images.docker import docker_import
from cua_rl.images.qcow2 import make_qcow2

log = logging.getLogger(__name__)

BUILD_TIMEOUT_S = 3600.0
# Documentation, man pages and locales are most of a minbase tree's bytes and
# nothing a desktop task reads (kept: copyright files, as Debian asks).
DPKG_EXCLUDES = ("/usr/share/man/*", "/usr/share/doc/*", "/usr/share/info/*",
                 "/usr/share/locale/*", "/usr/share/help/*")


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


def _run(argv: list[str], what: str, timeout: float = BUILD_TIMEOUT_S, **kw) -> str:
    """Run a build step; DesktopError naming the step and the tail of its output."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)
    except FileNotFoundError:
        raise DesktopError(f"image build: `{argv[0]}` not found (apt-get install "
                           "mmdebstrap qemu-utils e2fsprogs docker.io)") from None
    except subprocess.TimeoutExpired:
        raise DesktopError(f"image build: {what} took longer than {timeout:.0f} s") from None
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).strip()[-3000:]
        raise DesktopError(f"image build: {what} failed (exit {proc.returncode}):\n{tail}")
    return proc.stdout


def _mmdebstrap(recipe: rc.Recipe, root: Path) -> None:
    argv = ["mmdebstrap", "--variant=minbase", "--mode=auto", "--quiet",
            f"--include={','.join(recipe.packages)}",
            *(f"--dpkgopt=path-exclude={p}" for p in DPKG_EXCLUDES),
            "--dpkgopt=path-include=/usr/share/doc/*/copyright",
            # an image is built once and run many times: no apt lists or debs inside
            "--customize-hook=rm -rf \"$1\"/var/lib/apt/lists/* \"$1\"/var/cache/apt/*",
            recipe.suite, str(root)]
    _run(argv, "mmdebstrap")


def _install_pins(recipe: rc.Recipe, root: Path) -> None:
    """The guest's pinned Python closure into /opt/cua-guest/site (base layer)."""
    target = root / rc.SITE_IN_IMAGE.lstrip("/")
    target.mkdir(parents=True, exist_ok=True)
    pins = [f"{name}=={version}" for name, version in recipe.python.items()]
    if pins:
        _run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
              "--no-compile", "--target", str(target), *pins],
             "pip install of the guest's dependencies")


COMPILE_DIRS = ("/usr/lib/python3", "/usr/lib/python3.11", rc.SITE_IN_IMAGE)


def _compile_base(root: Path) -> None:
    """Byte-compile the image's Python with hash-checked pycs, in the image's own
    interpreter. The layer tars carry mtime 0, so the timestamp pycs Debian's
    postinst wrote no longer match their sources (and the guest's closure has none):
    without this every desktop, as `user`, compiled every module it imported on
    every start, which under TCG is tens of seconds. A file that does not compile
    (test data in the stdlib) is skipped."""
    script = ("python3 -m compileall -q -f -j 0 --invalidation-mode checked-hash "
              f"{' '.join(COMPILE_DIRS)} >/dev/null 2>&1; true")
    _run(["chroot", str(root), "sh", "-c", script], "byte-compiling the image's Python")


def _compile_guest(stage: Path) -> None:
    """Hash-checked pycs for the guest (top layer) when this interpreter is the
    image's minor version (its pyc format); else the guest compiles at start."""
    if sys.version_info[:2] != (3, 11):
        log.warning("image build: host Python %d.%d is not the image's 3.11: the guest "
                    "is not byte-compiled", *sys.version_info[:2])
        return
    import compileall
    import py_compile

    compileall.compile_dir(stage / rc.GUEST_IN_IMAGE.lstrip("/"), quiet=2, force=True,
                           invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)


def _install_guest(stage: Path) -> None:
    """The guest itself, non-editable, into /opt/cua-guest/guest (top layer)."""
    target = stage / rc.GUEST_IN_IMAGE.lstrip("/")
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:  # build from a copy: no build/ in the checkout
        src = Path(tmp) / "guest"
        shutil.copytree(rc.guest_source_dir(), src,
                        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
        _run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
              "--no-build-isolation", "--no-compile", "--no-index", "--target", str(target),
              str(src)], "pip install of the guest")


def _install_session(stage: Path) -> None:
    script = stage / rc.SESSION_SCRIPT_IN_IMAGE.lstrip("/")
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(rc.session_script())
    script.chmod(0o755)


def _add_user(root: Path) -> None:
    # --no-log-init: a high uid would make /var/log/lastlog and faillog sparse files
    # of hundreds of GB, which the tar would store whole.
    _run(["chroot", str(root), "groupadd", "--gid", str(rc.UID), rc.USER], "groupadd")
    _run(["chroot", str(root), "useradd", "--create-home", "--no-log-init", "--uid",
          str(rc.UID), "--gid", str(rc.UID), "--shell", "/bin/bash", rc.USER], "useradd")
    for name in rc.HOME_DIRS:  # the folders OSWorld's tasks expect in the home
        path = root / "home" / rc.USER / name
        path.mkdir(exist_ok=True)
        os.chown(path, rc.UID, rc.UID)
    write_default_apps(root)
    template = root / rc.HOME_TEMPLATE_IN_IMAGE.lstrip("/")
    template.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(root / "home" / rc.USER, template, symlinks=True)


def write_default_apps(root: Path, owner: tuple[int, int] = (rc.UID, rc.UID)) -> Path | None:
    """`~/.config/mimeapps.list` of the image's user making Totem and Evince the
    defaults, as on OSWorld's image and in local desktops' home template (without
    it VLC is the only video player, so "make VLC the default" passes untouched).
    Only the apps the image installs are named; nothing is written when it has none
    (the minimal profile). Returns the file written."""
    content = default_apps_list(root / "usr" / "share" / "applications")
    if content is None:
        return None
    config = root / "home" / rc.USER / ".config"
    config.mkdir(parents=True, exist_ok=True)
    target = config / "mimeapps.list"
    target.write_text(content)
    for path in (config, target):
        os.chown(path, *owner)
    return target


def _resolved_versions(root: Path) -> dict[str, str]:
    out = _run(["chroot", str(root), "dpkg-query", "-W", "-f", "${Package}=${Version}\\n"],
               "dpkg-query")
    return dict(sorted(line.split("=", 1) for line in out.splitlines() if "=" in line))


def content_hash(recipe_key: str, debian: dict[str, str], python: dict[str, str]) -> str:
    blob = json.dumps({"recipe": recipe_key, "debian": debian, "python": python},
                      sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()


def _lookup(cache: Path, key: str) -> BuiltImage | None:
    link = cache / "by-recipe" / key
    try:
        content = link.read_text().strip()
        manifest = json.loads((cache / content / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    return BuiltImage(content, cache / content, manifest, cached=True)


def build_image(profile: rc.Profile = "full", fmt: rc.Format = "docker",
                cache: Path | None = None, refresh: bool = False) -> BuiltImage:
    """Build (or find in the cache) the image of `profile` in format `fmt`.

    `refresh` rebuilds both layers; otherwise a cached base is reused and only
    the top layer (guest, session script, manifest) is built when it changed."""
    cache = cache or default_cache_dir()
    recipe = rc.Recipe.for_profile(profile)
    key = recipe.key()
    image = None if refresh else _lookup(cache, key)
    if image is None or not image.rootfs_tar.is_file():
        base = layers.base_layer(recipe, cache, refresh, _build_base)
        image = _build_image(recipe, key, base, cache)
    if fmt == "qcow2" and not image.qcow2.is_file():
        make_qcow2(image.rootfs_tar, image.dir)
    if fmt == "docker":
        tag = docker_import(image.rootfs_tar, image.content_hash, profile)
        image = BuiltImage(image.content_hash, image.dir, image.manifest, docker_tag=tag,
                           cached=image.cached)
    return image


def _build_base(recipe: rc.Recipe, out: Path) -> dict[str, str]:
    """mmdebstrap + the user + the Python closure -> out/rootfs.tar; returns the
    resolved Debian versions."""
    with tempfile.TemporaryDirectory(dir=out.parent, prefix="base-") as tmp:
        root = Path(tmp) / "root"
        log.warning("building the %s base layer (mmdebstrap %s, %d packages)",
                    recipe.profile, recipe.suite, len(recipe.packages))
        _mmdebstrap(recipe, root)
        _add_user(root)
        _install_pins(recipe, root)
        _compile_base(root)
        debian = _resolved_versions(root)
        # sorted, numeric owners, fixed mtimes: the same tree gives the same tar
        _run(["tar", "--format=gnu", "--sort=name", "--numeric-owner", "--mtime=@0",
              "-C", str(root),
              "-cf", str(out / "rootfs.tar"), "."], "tar of the base layer")
    return debian


def _build_image(recipe: rc.Recipe, key: str, base: layers.Base, cache: Path) -> BuiltImage:
    """The top layer (guest, session script, manifest) appended to a copy of the base."""
    began = time.monotonic()
    with tempfile.TemporaryDirectory(dir=cache, prefix="build-") as tmp:
        stage = Path(tmp) / "top"
        _install_session(stage)
        _install_guest(stage)
        _compile_guest(stage)
        content = content_hash(key, base.debian, recipe.python)
        manifest = {"content_hash": content, "recipe_key": key, "base_key": base.key,
                    "recipe": asdict(recipe), "debian": base.debian, "python": recipe.python,
                    "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "base_build_s": base.build_s}
        mpath = stage / rc.MANIFEST_IN_IMAGE.lstrip("/")
        mpath.parent.mkdir(parents=True, exist_ok=True)
        mpath.write_text(json.dumps(manifest, indent=1))
        out = Path(tmp) / content
        out.mkdir()
        layers.append_top(base.rootfs_tar, stage, out / "rootfs.tar")
        manifest["top_build_s"] = round(time.monotonic() - began, 1)
        # what this call spent: the top layer, plus the base when it was built now
        manifest["build_s"] = round(manifest["top_build_s"]
                                    + (base.build_s if base.built_now else 0.0), 1)
        (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
        final = cache / content
        if final.exists():
            shutil.rmtree(final)
        out.rename(final)
    (cache / "by-recipe").mkdir(exist_ok=True)
    (cache / "by-recipe" / key).write_text(content + "\n")
    return BuiltImage(content, final, manifest)
