"""The desktops of an evaluation: the provider and the identity of the image its
desktops run, so that a score can be traced to the apps that produced it.

- `local`: the guest package's content hash (the venv desktops run it from) and
  the Debian versions of the apps tasks drive;
- `container`: the image tag and the engine's image id;
- `docker`: the engine's id of OSWorld's container image, and the qcow2 it boots;
- `qemu`: the qcow2 (and a direct-boot kernel beside it);
- `aws`: the AMI and instance type.

A qcow2 is tens of GB: its quick identity is its size and the sha256 of its first
and last 16 MiB (where the header and the newest clusters lie); the full hash
(`full=True`) reads it all. A tool that is missing or fails leaves an `error`
entry: the manifest is written anyway and says what it could not learn.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path
from typing import Any

from cua_rl.desktop.providers.config import ProviderConfig
from cua_rl.report.manifest.model import sha256_file

EDGE = 16 << 20
"""Bytes hashed at each end of a disk image for its quick identity."""
APP_PACKAGES = (
    "chromium",
    "libreoffice-core",
    "gimp",
    "vlc",
    "thunderbird",
    "xvfb",
    "openbox",
    "python3",
    "python3-pyatspi",
)
"""Debian packages whose versions local desktops' scores depend on."""
TIMEOUT_S = 60.0


def _run(argv: list[str]) -> tuple[str | None, str | None]:
    """(stdout, None) of a command that succeeded, else (None, why)."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{argv[0]}: {exc}"[:300]
    if done.returncode != 0:
        return None, f"{' '.join(argv[:3])}: {(done.stderr or done.stdout).strip()[:300]}"
    return done.stdout, None


def disk_identity(path: Path, *, full: bool = False) -> dict[str, Any]:
    """A disk image's size and quick hash (first and last `EDGE` bytes), and its full
    sha256 with `full`."""
    path = path.expanduser()
    if not path.is_file():
        return {"path": str(path), "error": "no such file"}
    size = path.stat().st_size
    digest = hashlib.sha256(str(size).encode())
    with path.open("rb") as f:
        digest.update(f.read(EDGE))
        f.seek(max(0, size - EDGE))
        digest.update(f.read(EDGE))
    out: dict[str, Any] = {"path": str(path), "bytes": size, "quick_id": digest.hexdigest()[:32]}
    if full:
        out["sha256"] = sha256_file(path)
    return out


def image_id(engine: str, image: str) -> dict[str, Any]:
    """The engine's id of a container image (what a tag pointed to at the time)."""
    stdout, error = _run([engine, "image", "inspect", "--format", "{{.Id}}", image])
    return {
        "image": image,
        "engine": engine,
        "id": stdout.strip() if stdout else None,
        **({"error": error} if error else {}),
    }


def app_versions(packages: tuple[str, ...] = APP_PACKAGES) -> dict[str, Any]:
    """Installed Debian version of each package (None: not installed). dpkg-query
    exits 1 when any package is missing, and still lists the others."""
    argv = ["dpkg-query", "-W", "-f", "${Package} ${Version}\\n", *packages]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"error": f"dpkg-query: {exc}"[:300]}
    found = dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)
    return {p: found.get(p) for p in packages}


def local_identity() -> dict[str, Any]:
    """The guest code's content hash and the apps' versions of local desktops."""
    from cua_rl.desktop.providers.local import vscode
    from cua_rl.desktop.providers.local.guest_env import content_hash, guest_source_dir

    source = guest_source_dir()
    return {
        "guest_hash": content_hash(source) if source else None,
        "apps": app_versions(),
        "code_server": vscode.CODE_SERVER_VERSION if vscode.install_dir() else None,
    }


def desktops_section(provider: ProviderConfig, count: int, *, full: bool = False) -> dict[str, Any]:
    """The manifest's `desktops`."""
    out: dict[str, Any] = {
        "provider": provider.type,
        "count": count,
        "network": provider.has_network,
    }
    if provider.type == "local":
        out["image"] = local_identity()
    elif provider.type == "container":
        from cua_rl.desktop.providers.container.provider import pick_engine

        out["image"] = image_id(pick_engine(provider.engine), provider.image)
    elif provider.type == "docker":
        out["image"] = {
            "container": image_id("docker", provider.docker_image),
            "disk": disk_identity(provider.image, full=full),
        }
    elif provider.type == "qemu":
        out["image"] = {"disk": disk_identity(provider.image, full=full)}
        kernel = provider.kernel or provider.image.expanduser().parent / "vmlinuz"
        if kernel.is_file():
            out["image"]["kernel"] = {"path": str(kernel), "sha256": sha256_file(kernel)}
    elif provider.type == "aws":
        from cua_rl.desktop.providers.aws.config import OSWORLD_AMIS

        out["image"] = {
            "ami_id": provider.ami_id or OSWORLD_AMIS.get(provider.region),
            "image_kind": provider.image_kind,
            "region": provider.region,
            "instance_type": provider.instance_type,
        }
    return out
