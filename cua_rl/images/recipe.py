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
from dataclasses import asdict, dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Literal

from packaging.requirements import Requirement

Profile = Literal["minimal", "full"]
Format = Literal["rootfs", "docker", "qcow2"]

RECIPE_VERSION = 4
"""Bumped whenever the build steps change in a way the package lists do not show
(2: the image is a cached base layer plus a top layer with the guest; 3: its Python
is byte-compiled with hash-checked pycs; 4: the user's uid is `UID`, no longer
1000, and its home has a template copy at `HOME_TEMPLATE_IN_IMAGE`). The user's
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
HOME_DIRS = ("Desktop", "Documents", "Downloads", "Music", "Pictures", "Videos")

# The session: an X server, a window manager, D-Bus (AT-SPI needs a session bus)
# and what the guest's window routes call; `xterm` is the one app of `minimal`.
MINIMAL_PACKAGES = (
    "python3", "xvfb", "openbox", "dbus", "dbus-x11", "xdotool", "wmctrl", "x11-utils",
    "procps", "fonts-dejavu-core", "xterm",
    # pyautogui imports mouseinfo, which exits without tkinter
    "python3-tk",
)
# The local task suite's apps and what the OSWorld-fidelity work relies on.
FULL_PACKAGES = MINIMAL_PACKAGES + (
    "at-spi2-core", "python3-pyatspi", "dconf-gsettings-backend", "gsettings-desktop-schemas",
    "libreoffice-calc", "libreoffice-writer", "libreoffice-impress", "mousepad", "chromium",
    "gimp", "vlc", "thunderbird", "socat", "ffmpeg", "xdg-utils",
    "tesseract-ocr",
    # GNOME's terminal, file manager and editor: OSWorld's os and multi_apps tasks
    # start them (setup.sh installs them for local desktops too)
    "gnome-terminal", "nautilus", "gedit",
    # GNOME Shell's settings schema (data only): a task edits its favourite apps
    "gnome-shell-common",
    # tools OSWorld's setups `sudo apt install` (setup.sh has them for local desktops)
    "jq", "unzip", "sysstat", "xsel",
    # OSWorld's image has GNOME's video player and PDF viewer as the defaults (a task
    # makes VLC the default; a VLC task waits for Evince's window): setup.sh installs
    # them for local desktops, and the build makes them the user's defaults
    "totem", "evince",
)
# A VM boots Debian's kernel straight from the image (no boot loader), with our
# session script as the init (no systemd): the network needs iproute2. Every
# image has them, so one root file system serves containers and VMs alike (the
# docker import leaves /boot and the kernel modules out).
VM_PACKAGES = ("linux-image-amd64", "iproute2", "kmod")

GUEST_DIST = "cua-guest"
# Debian bookworm's interpreter: the markers the image's pip would evaluate.
IMAGE_MARKERS = {"python_version": "3.11", "python_full_version": "3.11.2",
                 "platform_system": "Linux", "sys_platform": "linux",
                 "platform_machine": "x86_64", "implementation_name": "cpython",
                 "platform_python_implementation": "CPython", "os_name": "posix"}
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

        raise DesktopError(f"image build: the guest at {root} is not a source tree; build "
                           "images from a checkout (pip install -e vm/guest)")
    return root


def tree_digest(root: Path) -> str:
    """sha256 over the relative paths and bytes of a source tree (no caches)."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and "__pycache__" not in rel and ".egg-info" not in rel:
            digest.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
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
    version: int = RECIPE_VERSION

    @classmethod
    def for_profile(cls, profile: Profile) -> Recipe:
        return cls(profile=profile, packages=packages(profile),
                   python=python_closure(), guest_digest=tree_digest(guest_source_dir()),
                   script_digest=hashlib.sha256(session_script().encode()).hexdigest())

    def base_key(self) -> str:
        """sha256 of what the base layer is built from (not the guest, not the script)."""
        base = {"suite": self.suite, "packages": self.packages, "python": self.python,
                "version": self.version}
        return hashlib.sha256(json.dumps(base, sort_keys=True).encode()).hexdigest()

    def key(self) -> str:
        """sha256 of the whole recipe (both layers)."""
        blob = json.dumps(asdict(self), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()
