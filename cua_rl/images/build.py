"""Build a desktop image from a `Recipe`: mmdebstrap a root file system, install
the guest and the session script, record the resolved versions, and turn the
tree into the requested format.

Images are cached under `~/.cache/cua-rl/images/<content hash>/`, where the
content hash covers the recipe and every resolved package version (the
manifest). `by-recipe/<recipe key>` points at the content hash of the last build
of a recipe, so an unchanged recipe is never rebuilt (`refresh=True` does).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

from cua_rl.errors import DesktopError
from cua_rl.images import recipe as rc
from cua_rl.images.qcow2 import make_qcow2

log = logging.getLogger(__name__)

BUILD_TIMEOUT_S = 3600.0
DOCKER_REPO = "cua-rl-desktop"
VM_ONLY = ("boot/", "usr/lib/modules/", "lib/modules/")
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


def _install_guest(recipe: rc.Recipe, root: Path) -> None:
    """The guest, non-editable, and its pinned Python closure into /opt/cua-guest."""
    target = root / rc.GUEST_DIR_IN_IMAGE.lstrip("/") / "site"
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:  # build from a copy: no build/ in the checkout
        src = Path(tmp) / "guest"
        shutil.copytree(rc.guest_source_dir(), src,
                        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
        pins = [f"{name}=={version}" for name, version in recipe.python.items()]
        _run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
              "--no-build-isolation", "--no-compile", "--target", str(target),
              str(src), *pins], "pip install of the guest")


def _install_session(root: Path) -> None:
    script = root / rc.SESSION_SCRIPT_IN_IMAGE.lstrip("/")
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(rc.session_script())
    script.chmod(0o755)
    _run(["chroot", str(root), "useradd", "--create-home", "--uid", str(rc.UID),
          "--user-group", "--shell", "/bin/bash", rc.USER], "useradd")
    for name in rc.HOME_DIRS:  # the folders OSWorld's tasks expect in the home
        path = root / "home" / rc.USER / name
        path.mkdir(exist_ok=True)
        os.chown(path, rc.UID, rc.UID)


def _resolved_versions(root: Path) -> dict[str, str]:
    out = _run(["chroot", str(root), "dpkg-query", "-W", "-f", "${Package}=${Version}\\n"],
               "dpkg-query")
    return dict(sorted(line.split("=", 1) for line in out.splitlines() if "=" in line))


def content_hash(recipe_key: str, debian: dict[str, str], python: dict[str, str]) -> str:
    blob = json.dumps({"recipe": recipe_key, "debian": debian, "python": python},
                      sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()


def _docker_tag(content: str) -> str:
    return f"{DOCKER_REPO}:{content[:16]}"


def docker_has(tag: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", tag], capture_output=True,
                          timeout=60).returncode == 0


def _container_tree(rootfs_tar: Path, out: IO[bytes]) -> None:
    """Stream the root file system without what only a VM boots (kernel, initrd,
    modules): a container runs on the host's kernel."""
    with tarfile.open(rootfs_tar) as src, tarfile.open(fileobj=out, mode="w|") as dst:
        for member in src:
            name = member.name.removeprefix("./")
            if name.startswith(VM_ONLY) or name in ("vmlinuz", "initrd.img", "vmlinuz.old",
                                                   "initrd.img.old"):
                continue
            dst.addfile(member, src.extractfile(member) if member.isfile() else None)


def _docker_import(image: BuiltImage, profile: str) -> str:
    """`docker import` the rootfs tar; the entry point and user come with it."""
    tag = _docker_tag(image.content_hash)
    if not docker_has(tag):
        changes = [f'ENTRYPOINT ["{rc.SESSION_SCRIPT_IN_IMAGE}"]', f"USER {rc.USER}",
                   f"WORKDIR /home/{rc.USER}", "ENV CUA_RUN_DIR=/run/cua",
                   f"LABEL cua-rl.image={image.content_hash}"]
        argv = ["docker", "import", *(a for c in changes for a in ("--change", c)), "-", tag]
        with tempfile.TemporaryFile() as err:  # a file: a full pipe cannot stall the import
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                    stderr=err)
            assert proc.stdin is not None
            try:
                _container_tree(image.rootfs_tar, proc.stdin)
            finally:
                proc.stdin.close()
            proc.wait(timeout=BUILD_TIMEOUT_S)
            err.seek(0)
            if proc.returncode != 0:
                raise DesktopError("image build: docker import failed: "
                                   f"{err.read().decode(errors='replace')[-2000:]}")
    _run(["docker", "tag", tag, f"{DOCKER_REPO}:{profile}"], "docker tag")
    return tag


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
    """Build (or find in the cache) the image of `profile` in format `fmt`."""
    cache = cache or default_cache_dir()
    recipe = rc.Recipe.for_profile(profile)
    key = recipe.key()
    image = None if refresh else _lookup(cache, key)
    if image is None or not image.rootfs_tar.is_file():
        image = _build_rootfs(recipe, key, cache)
    if fmt == "qcow2" and not image.qcow2.is_file():
        make_qcow2(image.rootfs_tar, image.dir)
    if fmt == "docker":
        image = BuiltImage(image.content_hash, image.dir, image.manifest,
                           docker_tag=_docker_import(image, profile), cached=image.cached)
    return image


def _build_rootfs(recipe: rc.Recipe, key: str, cache: Path) -> BuiltImage:
    began = time.monotonic()
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix="build-") as tmp:
        root = Path(tmp) / "root"
        log.warning("building the %s image (mmdebstrap %s, %d packages)", recipe.profile,
                    recipe.suite, len(recipe.packages))
        _mmdebstrap(recipe, root)
        _install_session(root)
        _install_guest(recipe, root)
        debian = _resolved_versions(root)
        content = content_hash(key, debian, recipe.python)
        manifest = {"content_hash": content, "recipe_key": key, "recipe": asdict(recipe),
                    "debian": debian, "python": recipe.python,
                    "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "build_s": round(time.monotonic() - began, 1)}
        mpath = root / rc.MANIFEST_IN_IMAGE.lstrip("/")
        mpath.parent.mkdir(parents=True, exist_ok=True)
        mpath.write_text(json.dumps(manifest, indent=1))
        out = Path(tmp) / content
        out.mkdir()
        # sorted, numeric owners, fixed mtimes: the same tree gives the same tar
        _run(["tar", "--sort=name", "--numeric-owner", "--mtime=@0", "-C", str(root),
              "-cf", str(out / "rootfs.tar"), "."], "tar of the root file system")
        (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
        final = cache / content
        if final.exists():
            shutil.rmtree(final)
        out.rename(final)
    (cache / "by-recipe").mkdir(exist_ok=True)
    (cache / "by-recipe" / key).write_text(content + "\n")
    return BuiltImage(content, final, manifest)
