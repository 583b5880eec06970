"""The base layer of an image (`images.build`): the tree mmdebstrap makes from the
recipe's packages, with the user and its home, the desktop's files, code-server when
the profile has it and the guest's pinned Python closure, byte-compiled, as a tar;
and `run_step`, the runner of every build step.

It is apart from images/build.py, which caches images by content, stages the top
layer (guest, session script, manifest) and converts to the requested format: the base
is the slow part (minutes), rebuilt only when its packages, pins or recipe version
change (`layers.base_layer` caches it), and these are the steps that make it.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from cua_rl.errors import DesktopError
from cua_rl.images import desktop_files
from cua_rl.images import recipe as rc
from cua_rl.images.code_server import code_server_tar
from cua_rl.images.default_apps import default_apps_list
from cua_rl.images.home_files import write_home_files
from cua_rl.images.vscode_script import CODE_SERVER_MOUNT

log = logging.getLogger(__name__)

BUILD_TIMEOUT_S = 3600.0
# Documentation, man pages and locales are most of a minbase tree's bytes and
# nothing a desktop task reads (kept: copyright files, as Debian asks).
DPKG_EXCLUDES = (
    "/usr/share/man/*",
    "/usr/share/doc/*",
    "/usr/share/info/*",
    "/usr/share/locale/*",
    "/usr/share/help/*",
)


def run_step(argv: list[str], what: str, timeout: float = BUILD_TIMEOUT_S, **kw) -> str:
    """Run a build step; DesktopError naming the step and the tail of its output."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)
    except FileNotFoundError:
        raise DesktopError(
            f"image build: `{argv[0]}` not found (apt-get install "
            "mmdebstrap qemu-utils e2fsprogs docker.io)"
        ) from None
    except subprocess.TimeoutExpired:
        raise DesktopError(f"image build: {what} took longer than {timeout:.0f} s") from None
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).strip()[-3000:]
        raise DesktopError(f"image build: {what} failed (exit {proc.returncode}):\n{tail}")
    return proc.stdout


def _mmdebstrap(recipe: rc.Recipe, root: Path) -> None:
    argv = [
        "mmdebstrap",
        "--variant=minbase",
        "--mode=auto",
        "--quiet",
        f"--include={','.join(recipe.packages)}",
        *(f"--dpkgopt=path-exclude={p}" for p in DPKG_EXCLUDES),
        "--dpkgopt=path-include=/usr/share/doc/*/copyright",
        # an image is built once and run many times: no apt lists or debs inside
        '--customize-hook=rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*',
        recipe.suite,
        str(root),
    ]
    run_step(argv, "mmdebstrap")


def _install_pins(recipe: rc.Recipe, root: Path) -> None:
    """The guest's pinned Python closure into /opt/cua-guest/site (base layer)."""
    target = root / rc.SITE_IN_IMAGE.lstrip("/")
    target.mkdir(parents=True, exist_ok=True)
    pins = [f"{name}=={version}" for name, version in recipe.python.items()]
    if pins:
        run_step(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-deps",
                "--no-compile",
                "--target",
                str(target),
                *pins,
            ],
            "pip install of the guest's dependencies",
        )


COMPILE_DIRS = ("/usr/lib/python3", "/usr/lib/python3.11", rc.SITE_IN_IMAGE)


def _compile_base(root: Path) -> None:
    """Byte-compile the image's Python with hash-checked pycs, in the image's own
    interpreter. The layer tars carry mtime 0, so the timestamp pycs Debian's
    postinst wrote no longer match their sources (and the guest's closure has none):
    without this every desktop, as `user`, compiled every module it imported on
    every start, which under TCG is tens of seconds. A file that does not compile
    (test data in the stdlib) is skipped."""
    script = (
        "python3 -m compileall -q -f -j 0 --invalidation-mode checked-hash "
        f"{' '.join(COMPILE_DIRS)} >/dev/null 2>&1; true"
    )
    run_step(["chroot", str(root), "sh", "-c", script], "byte-compiling the image's Python")


def _add_user(root: Path) -> None:
    # --no-log-init: a high uid would make /var/log/lastlog and faillog sparse files
    # of hundreds of GB, which the tar would store whole.
    run_step(["chroot", str(root), "groupadd", "--gid", str(rc.UID), rc.USER], "groupadd")
    # An empty skeleton: a local desktop's home has no /etc/skel dotfiles, and Debian's
    # .bashrc retitles every terminal window "user@host: dir" (goldens wait for
    # GNOME Terminal's own title, "Terminal").
    skel = root / "tmp" / "cua-empty-skel"
    skel.mkdir(parents=True, exist_ok=True)
    run_step(
        [
            "chroot",
            str(root),
            "useradd",
            "--create-home",
            "--skel",
            "/tmp/cua-empty-skel",
            "--no-log-init",
            "--uid",
            str(rc.UID),
            "--gid",
            str(rc.UID),
            "--shell",
            "/bin/bash",
            rc.USER,
        ],
        "useradd",
    )
    skel.rmdir()
    # what OSWorld's image has in a fresh home, as local desktops' template has it
    for path in write_home_files(root / "home" / rc.USER):
        os.lchown(path, rc.UID, rc.UID)
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


def _install_code_server(recipe: rc.Recipe, root: Path, cache: Path, refresh: bool) -> None:
    """code-server (built once per script and suite, `code_server`) at its place."""
    tar = code_server_tar(recipe.suite, cache, run_step, refresh)
    target = root / CODE_SERVER_MOUNT.lstrip("/")
    target.mkdir(parents=True, exist_ok=True)
    run_step(
        ["tar", "--numeric-owner", "--strip-components=1", "-xpf", str(tar), "-C", str(target)],
        "unpacking code-server",
    )
    if not (target / ".cua-rl-ready").is_file():
        raise DesktopError(
            f"image build: {tar} holds no finished code-server "
            "(.cua-rl-ready missing); rebuild with --refresh"
        )


def _resolved_versions(root: Path) -> dict[str, str]:
    out = run_step(
        ["chroot", str(root), "dpkg-query", "-W", "-f", "${Package}=${Version}\\n"], "dpkg-query"
    )
    return dict(sorted(line.split("=", 1) for line in out.splitlines() if "=" in line))


def build_base(recipe: rc.Recipe, out: Path, cache: Path, refresh: bool) -> dict[str, str]:
    """mmdebstrap + the user + the desktop's files (+ code-server) + the Python
    closure -> out/rootfs.tar; returns the resolved Debian versions."""
    with tempfile.TemporaryDirectory(dir=out.parent, prefix="base-") as tmp:
        root = Path(tmp) / "root"
        log.warning(
            "building the %s base layer (mmdebstrap %s, %d packages)",
            recipe.profile,
            recipe.suite,
            len(recipe.packages),
        )
        _mmdebstrap(recipe, root)
        _add_user(root)
        desktop_files.patch_base(root)
        if recipe.code_server:
            _install_code_server(recipe, root, cache, refresh)
        _install_pins(recipe, root)
        _compile_base(root)
        debian = _resolved_versions(root)
        # sorted, numeric owners, fixed mtimes: the same tree gives the same tar
        run_step(
            [
                "tar",
                "--format=gnu",
                "--sort=name",
                "--numeric-owner",
                "--mtime=@0",
                "-C",
                str(root),
                "-cf",
                str(out / "rootfs.tar"),
                ".",
            ],
            "tar of the base layer",
        )
    return debian
