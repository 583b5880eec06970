"""What a provider's desktops offer a task (`cua-rl tasks check`, `tasks verify`,
`eval`'s preflight): apps, root, the internet, what they lack by design.

- `local`: the host's executables, VS Code when ./setup.sh built code-server, the
  rootless `sudo` (`images.sudo_script`) answering `apt install` from the host's
  packages, and the `local_gap` tasks (`local_gaps.json`) apart;
- `container`, and `qemu` on this project's image (`cua-rl image build`): the same
  session as a local desktop (docs/osworld-local.md), so the same rules, with the
  image's packages (its build manifest when the image cache has it, else its
  profile's list) in place of the host's;
- `docker`, `aws`, and `qemu` on OSWorld's own qcow2: every app and real sudo.
Whether desktops reach the internet is the provider config's `has_network`.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from cua_rl.desktop.providers.config import ProviderConfig
from cua_rl.desktop.providers.local import vscode as local_vscode
from cua_rl.images import recipe as rc
from cua_rl.tasks.rootless_sudo import rootless_problem

UNSUPPORTED_LOCAL_APPS: dict[str, str] = {}
"""Apps local desktops cannot provide at all, with why."""
LOCAL_INSTALLS: dict[str, str] = {
    "code": "VS Code (code-server) is not installed: run ./setup.sh as root (docs/osworld-local.md)"
}
"""Apps local desktops get from an install of this project's own, not from the
host's PATH, with what to do when it is missing."""
IMAGE_APP_PACKAGES: dict[str, str] = {
    "socat": "socat",
    "thunderbird": "thunderbird",
    "gimp": "gimp",
    "vlc": "vlc",
    "libreoffice": "libreoffice-calc",
    "soffice": "libreoffice-calc",
    "nautilus": "nautilus",
    "gnome-terminal": "gnome-terminal",
    "gedit": "gedit",
    "google-chrome": "chromium",
}
"""A task's executable (`preflight.APP_EXECUTABLES`) -> the package of this project's
image that provides it (`google-chrome`: the image's launcher runs Chromium)."""


@dataclass(frozen=True, slots=True)
class HostCapabilities:
    """What the provider's desktops offer."""

    provider: str
    has_app: Callable[[str], bool]
    root: bool
    """Whether `sudo` inside a desktop works (OSWorld's VM images: yes; ours: never)."""
    network: bool = False
    """Whether desktops may reach the internet (`has_network` of the provider's config);
    without it, tasks that need the internet are filed under `network`."""
    gaps: Mapping[str, str] = field(default_factory=dict)
    """Task id -> what these desktops lack that the task needs (`local_gap`)."""
    sudo_problem: Callable[[str], str | None] | None = None
    """Without root: what the desktops' own `sudo` cannot do in a command, or None
    if it can do all (`rootless_problem`); unset, every sudo needs root."""
    missing_why: Mapping[str, str] = field(default_factory=dict)
    """App -> why these desktops lack it (beyond "not found")."""


def local_capabilities() -> HostCapabilities:
    """Local desktops: the host's executables (Chromium counts as `google-chrome`,
    see `local.user.chrome_shim`), VS Code when setup.sh built code-server
    (`local.vscode`), minus the apps that cannot be provided."""
    why = {**LOCAL_INSTALLS, **UNSUPPORTED_LOCAL_APPS}

    def has_app(name: str) -> bool:
        if name in UNSUPPORTED_LOCAL_APPS:
            return False
        if name == "code":
            return local_vscode.install_dir() is not None
        if name == "google-chrome":
            return any(shutil.which(n) for n in ("google-chrome", "chromium", "chromium-browser"))
        return shutil.which(name) is not None

    return HostCapabilities(
        "local",
        has_app,
        root=False,
        gaps=local_gaps(),
        sudo_problem=rootless_problem,
        missing_why=why,
    )


def local_gaps() -> dict[str, str]:
    """{task id: reason} of `local_gaps.json`: what this project's desktops (local,
    and the image's) lack that a task needs, found while writing the goldens."""
    return json.loads((Path(__file__).with_name("local_gaps.json")).read_text())


def image_capabilities(
    provider: str = "container",
    profile: rc.Profile = "full",
    installed: Collection[str] | None = None,
) -> HostCapabilities:
    """Desktops of this project's image of `profile`, whose Debian packages are
    `installed` (default: the profile's list): the local desktops' session on the
    image's packages: its apps, the rootless `sudo` answering from its packages, no
    root, the same gaps."""
    have = frozenset(installed if installed is not None else rc.packages(profile))
    code = profile in rc.CODE_SERVER_PROFILES

    def has_app(name: str) -> bool:
        if name == "code":
            return code
        package = IMAGE_APP_PACKAGES.get(name)
        return package is not None and package in have

    why = {
        app: f"the {profile} image has no {package} (`cua-rl image build --profile full`)"
        for app, package in IMAGE_APP_PACKAGES.items()
        if package not in have
    }
    if not code:
        why["code"] = f"the {profile} image has no code-server (the full profile has)"

    def sudo_problem(command: str) -> str | None:
        return rootless_problem(command, has_package=have.__contains__)

    return HostCapabilities(
        provider, has_app, root=False, gaps=local_gaps(), sudo_problem=sudo_problem, missing_why=why
    )


def provider_config(provider: str | ProviderConfig) -> ProviderConfig:
    """The provider's config: as given, or the defaults of the provider named."""
    if not isinstance(provider, str):
        return provider
    from pydantic import TypeAdapter

    return TypeAdapter(ProviderConfig).validate_python({"type": provider})


def ours(config: ProviderConfig) -> tuple[rc.Profile, frozenset[str]] | None:
    """(profile, installed packages) when `config`'s desktops run this project's image
    (container: always; qemu: a disk with our kernel beside it, or whose build
    manifest the image cache has), else None (OSWorld's own image)."""
    from cua_rl.images.build import default_cache_dir
    from cua_rl.images.manifests import find_manifest, installed_packages, profile_of

    if config.type not in ("container", "qemu"):
        return None
    image = config.image
    manifest = find_manifest(image, default_cache_dir())
    if (
        config.type == "qemu"
        and manifest is None
        and getattr(config, "kernel", None) is None
        and not (Path(image).parent / "vmlinuz").is_file()
    ):
        return None
    profile = profile_of(image, manifest) or "full"
    return profile, installed_packages(profile, manifest)


def capabilities_for(provider: str | ProviderConfig) -> HostCapabilities:
    """Local desktops: this host's apps; this project's image (container, qemu on it):
    its packages; the VM providers on OSWorld's own image (`docker`, `qemu`, `aws`):
    every app, and sudo with the user's password. Whether desktops reach the internet
    is the provider config's own answer (`has_network`: docker's default network and
    aws do; local only with `network: true`, container never, qemu without
    `restrict_network`); a provider named without a config has its defaults."""
    config = provider_config(provider)
    name, network = config.type, config.has_network
    if name == "local":
        return replace(local_capabilities(), network=network)
    image = ours(config)
    if image is not None:
        return replace(image_capabilities(name, *image), network=network)
    return HostCapabilities(name, lambda app: True, root=True, network=network)
