"""What a desktop image holds: Debian packages per profile, the guest's Python
closure, and the session script that runs inside every container or VM.

The recipe is data, so its hash (`recipe_key`) says whether a cached image was
built from the same inputs; the resolved versions are recorded by `build`.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import re
from dataclasses import asdict, dataclass, field, replace
from importlib.resources import files
from pathlib import Path
from typing import Literal

from packaging.requirements import Requirement

from cua_rl.images.desktop_files import BIN_IN_IMAGE, bin_scripts

__all__ = ["BIN_IN_IMAGE", "Recipe", "packages", "python_closure", "session_script"]

Profile = Literal["minimal", "full"]
Format = Literal["rootfs", "docker", "qcow2"]

RECIPE_VERSION = 5
"""Bumped whenever the build steps change in a way the package lists do not show
(2: the image is a cached base layer plus a top layer with the guest; 3: its Python
is byte-compiled with hash-checked pycs; 4: the user's uid is `UID`, no longer
1000, and its home has a template copy at `HOME_TEMPLATE_IN_IMAGE`; 5: what local
desktops have for OSWorld's tasks: the home of `images.home_files` (and no /etc/skel
dotfiles, as a local desktop's home has none), openbox's Ctrl+Alt+T, Chromium as
`chrome`, code-server in `full` (`images.desktop_files`)). The user's
default-apps list needs no bump: it is written only for Totem/Evince, whose
addition changed the package list, so no base built before it has the same key)."""
SUITE = "bookworm"
USER = "user"
UID = 1_879_048_192
"""The image's `user` (and its group): a uid that is no account on a host, so a
process that escaped a container desktop owns nothing there (uid 1000 is usually
the host's first account). It is the first uid above systemd's container range
(524288-1879048191) and far above what `useradd` hands out as subordinate ids
(/etc/subuid: 100000 + 65536 n); the container provider still refuses to start
when a host account or subordinate range holds it (`container_uid.check_host_uid`)."""

# The session: an X server, a window manager, D-Bus (AT-SPI needs a session bus)
# and what the guest's window routes call; `xterm` is the one app of `minimal`.
MINIMAL_PACKAGES = (
    "python3",
    "xvfb",
    "openbox",
    "dbus",
    "dbus-x11",
    "xdotool",
    "wmctrl",
    "x11-utils",
    "procps",
    "fonts-dejavu-core",
    "xterm",
    # pyautogui imports mouseinfo, which exits without tkinter
    "python3-tk",
    # tools OSWorld's setups `sudo apt install` (the desktop's rootless sudo succeeds
    # for what the image has; setup.sh has them for local desktops), and sound without
    # hardware: PulseAudio's null sink (a task turns the volume up with pactl). In
    # `minimal` too, so its desktops run OSWorld's shell tasks (the CI's goldens).
    "jq",
    "unzip",
    "sysstat",
    "xsel",
    "pulseaudio",
    "pulseaudio-utils",
)
# The local task suite's apps and what the OSWorld-fidelity work relies on.
FULL_PACKAGES = MINIMAL_PACKAGES + (
    "at-spi2-core",
    "python3-pyatspi",
    "dconf-gsettings-backend",
    "gsettings-desktop-schemas",
    "libreoffice-calc",
    "libreoffice-writer",
    "libreoffice-impress",
    "mousepad",
    "chromium",
    "gimp",
    "vlc",
    "thunderbird",
    "socat",
    "ffmpeg",
    "xdg-utils",
    "tesseract-ocr",
    # GNOME's terminal, file manager and editor: OSWorld's os and multi_apps tasks
    # start them (setup.sh installs them for local desktops too)
    "gnome-terminal",
    "nautilus",
    "gedit",
    # GNOME Shell's settings schema (data only): a task edits its favourite apps
    "gnome-shell-common",
    # code-server's search (it links Debian's rg instead of downloading one)
    "ripgrep",
    # command-line tools OSWorld's Ubuntu image (and a local desktop's host) has, which
    # tasks call: `file` is how xdg-open tells an .xlsx from a zip (without it office
    # files opened in Chromium), `bc` in an evaluator's command, git and zip in setups
    "file",
    "bc",
    "git",
    "zip",
    # DejaVu's other faces (bold, oblique, condensed), which local desktops' hosts have
    "fonts-dejavu-extra",
    # OSWorld's image has GNOME's video player and PDF viewer as the defaults (a task
    # makes VLC the default; a VLC task waits for Evince's window): setup.sh installs
    # them for local desktops, and the build makes them the user's defaults
    "totem",
    "evince",
)
# A VM boots Debian's kernel straight from the image (no boot loader), with our
# session script as the init (no systemd): the network needs iproute2. Every
# image has them, so one root file system serves containers and VMs alike (the
# docker import leaves /boot and the kernel modules out).
VM_PACKAGES = ("linux-image-amd64", "iproute2", "kmod")

GUEST_DIST = "cua-guest"
# Debian bookworm's interpreter: the markers the image's pip would evaluate.
IMAGE_MARKERS = {
    "python_version": "3.11",
    "python_full_version": "3.11.2",
    "platform_system": "Linux",
    "sys_platform": "linux",
    "platform_machine": "x86_64",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "os_name": "posix",
}
GUEST_DIR_IN_IMAGE = "/opt/cua-guest"
SITE_IN_IMAGE = f"{GUEST_DIR_IN_IMAGE}/site"
"""The guest's pinned Python closure (base layer)."""
GUEST_IN_IMAGE = f"{GUEST_DIR_IN_IMAGE}/guest"
"""The guest package itself (top layer): a directory of its own, so the top
layer adds files and never rewrites one of the base."""
SESSION_SCRIPT_IN_IMAGE = "/usr/local/bin/cua-desktop"
HOME_TEMPLATE_IN_IMAGE = "/usr/local/share/cua-rl/home"
"""A copy of the user's home as built: container desktops mount an empty
size-capped tmpfs on the home, which the session script fills from it (the
engine's tmpfs mounts copy nothing up)."""
MANIFEST_IN_IMAGE = "/etc/cua-image/manifest.json"
CODE_SERVER_PROFILES = ("full",)
"""Profiles whose image carries code-server at `vscode_script.CODE_SERVER_MOUNT`."""


def packages(profile: Profile) -> list[str]:
    """The Debian packages of an image, sorted (the list is part of the key)."""
    return sorted({*(FULL_PACKAGES if profile == "full" else MINIMAL_PACKAGES), *VM_PACKAGES})


def _requirement_name(spec: str) -> str | None:
    """`aiohttp>=3.9; extra == "x"` -> `aiohttp`; None when the marker rules it out
    on the image (Linux, CPython 3.11, no extras)."""
    req = Requirement(spec)
    if req.marker is not None and not req.marker.evaluate({"extra": "", **IMAGE_MARKERS}):
        return None
    return req.name


def python_closure(root: str = GUEST_DIST) -> dict[str, str]:
    """The guest's runtime dependencies, recursively, pinned to the versions
    installed here (the versions the project's tests ran against)."""
    pins: dict[str, str] = {}
    todo = [root]
    while todo:
        name = todo.pop()
        dist = importlib.metadata.distribution(name)
        key = re.sub(r"[-_.]+", "-", dist.metadata["Name"]).lower()
        if key in pins:
            continue
        pins[key] = dist.version
        todo += [n for n in map(_requirement_name, dist.requires or []) if n]
    pins.pop(re.sub(r"[-_.]+", "-", root).lower())
    return dict(sorted(pins.items()))


def guest_source_dir() -> Path:
    """`vm/guest` of the checkout the running `cua_rl` comes from."""
    import cua_guest  # installed beside cua-rl, editable from the checkout

    root = Path(cua_guest.__file__).resolve().parent.parent
    if not (root / "pyproject.toml").is_file():
        from cua_rl.errors import DesktopError

        raise DesktopError(
            f"image build: the guest at {root} is not a source tree; build "
            "images from a checkout (pip install -e vm/guest)"
        )
    return root


NOT_SOURCE = ("__pycache__", "build")
"""Directories of a source tree that are no source: caches, and the `build/` pip leaves
in it (the local provider's guest venv is a pip install of `vm/guest`). The image
build leaves them out of the guest too (`build._install_guest`)."""


def tree_digest(root: Path) -> str:
    """sha256 over the relative paths and bytes of a source tree (no caches, no build
    output: a pip install beside it must not make a new image)."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        parts = path.relative_to(root).parts
        if not path.is_file() or any(p in NOT_SOURCE or p.endswith(".egg-info") for p in parts):
            continue
        digest.update("/".join(parts).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def session_script() -> str:
    """The script every container/VM runs: read the token, start X, the window
    manager and the guest as `user` (see the script's own comments)."""
    return files("cua_rl.images").joinpath("cua-desktop.sh").read_text()


@dataclass(frozen=True)
class Recipe:
    """The inputs of one image (every format of it).

    An image is two layers: the base (what mmdebstrap and pip's closure consume:
    suite, packages, Python pins, recipe version), keyed by `base_key()` and
    cached on its own, and a small top layer (the guest, the session script,
    the manifest). `key()` covers both, so the image's key stays honest while
    an edit of the guest or the script rebuilds the top layer only.
    """

    profile: Profile
    suite: str = SUITE
    packages: list[str] = field(default_factory=list)
    python: dict[str, str] = field(default_factory=dict)
    guest_digest: str = ""
    script_digest: str = ""
    """sha256 of the top layer's scripts (the session script, `BIN_IN_IMAGE`'s)."""
    code_server: str = ""
    """The key of the code-server build in the base (`code_server.tree_key`), or ""
    for none."""
    version: int = RECIPE_VERSION

    @classmethod
    def for_profile(cls, profile: Profile) -> Recipe:
        from cua_rl.images.code_server import tree_key

        recipe = cls(
            profile=profile,
            packages=packages(profile),
            python=python_closure(),
            guest_digest=tree_digest(guest_source_dir()),
            code_server=tree_key(SUITE) if profile in CODE_SERVER_PROFILES else "",
        )
        # the top layer's scripts: the session's and the desktop's own commands
        scripts = [
            session_script(),
            *sorted(bin_scripts(recipe.packages, bool(recipe.code_server)).items()),
        ]
        digest = hashlib.sha256(json.dumps(scripts).encode()).hexdigest()
        return replace(recipe, script_digest=digest)

    def base_key(self) -> str:
        """sha256 of what the base layer is built from (not the guest, not the script)."""
        base = {
            "suite": self.suite,
            "packages": self.packages,
            "python": self.python,
            "version": self.version,
            "code_server": self.code_server,
        }
        return hashlib.sha256(json.dumps(base, sort_keys=True).encode()).hexdigest()

    def key(self) -> str:
        """sha256 of the whole recipe (both layers)."""
        blob = json.dumps(asdict(self), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()
