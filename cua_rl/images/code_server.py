"""code-server for the `full` image: built from the npm registry as ./setup.sh builds
it for local desktops (`code-server.sh`), inside a throwaway Debian tree of the
image's suite, so its native modules link against the image's own libraries.

The build tree (`mmdebstrap` of `BUILD_PACKAGES`, never kept) runs the script and
hands back `/opt/code-server` as a tar, cached under `code-server/<key>/` of the
image cache: the key covers the script and the suite, so a base rebuilt for another
reason (a package, a pin) reuses it. The tree gets the host's CA bundle for npm, so
a TLS-intercepting proxy that the host trusts works inside too.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from importlib.resources import files
from pathlib import Path

from cua_rl.images.vscode_script import CODE_SERVER_MOUNT, CODE_SERVER_VERSION

log = logging.getLogger(__name__)

BUILD_PACKAGES = ("nodejs", "npm", "g++", "make", "libkrb5-dev", "python3", "ca-certificates")
"""What code-server.sh needs to build (node and npm only fetch; code-server runs on
the Node 20 it downloads)."""
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
INSIDE = "/tmp/cua-code-server"
"""Where the script (and the host's CA bundle) go in the build tree."""
TAR_NAME = "code-server.tar"
Run = Callable[..., str]


def build_script() -> str:
    return files("cua_rl.images").joinpath("code-server.sh").read_text()


def tree_key(suite: str) -> str:
    """sha256 of what the build consumes: the script, the suite, the build packages."""
    blob = json.dumps(
        {"script": build_script(), "suite": suite, "packages": BUILD_PACKAGES}, sort_keys=True
    ).encode()
    return hashlib.sha256(blob).hexdigest()


def code_server_tar(suite: str, cache: Path, run: Run, refresh: bool = False) -> Path:
    """The cached tar of `/opt/code-server` for `suite` (built when missing); `run` is
    the image build's step runner (`base_build.run_step`)."""
    final = cache / "code-server" / tree_key(suite)
    tar = final / TAR_NAME
    if tar.is_file() and not refresh:
        return tar
    final.parent.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    log.warning(
        "building code-server %s for the full image (npm registry, in a %s tree)",
        CODE_SERVER_VERSION,
        suite,
    )
    with tempfile.TemporaryDirectory(dir=final.parent, prefix="building-") as tmp:
        stage = Path(tmp) / "in"
        stage.mkdir()
        (stage / "code-server.sh").write_text(build_script())
        env = ""
        if HOST_CA_BUNDLE.is_file():
            shutil.copyfile(HOST_CA_BUNDLE, stage / "ca.crt")
            env = f"npm_config_cafile={INSIDE}/ca.crt NODE_EXTRA_CA_CERTS={INSIDE}/ca.crt "
        out = Path(tmp) / "out"
        out.mkdir()
        build = f'chroot "$1" env HOME=/root {env}bash {INSIDE}/code-server.sh {CODE_SERVER_MOUNT}'
        run(
            [
                "mmdebstrap",
                "--variant=minbase",
                "--mode=auto",
                "--quiet",
                f"--include={','.join(BUILD_PACKAGES)}",
                f'--customize-hook=mkdir -p "$1"{INSIDE}',
                f"--customize-hook=sync-in {stage} {INSIDE}",
                f"--customize-hook={build}",
                f"--customize-hook=tar-out {CODE_SERVER_MOUNT} {out / TAR_NAME}",
                suite,
                "/dev/null",
            ],
            "building code-server (mmdebstrap + code-server.sh)",
        )
        (out / "built.json").write_text(
            json.dumps(
                {
                    "version": CODE_SERVER_VERSION,
                    "suite": suite,
                    "build_s": round(time.monotonic() - began, 1),
                }
            )
        )
        if final.exists():
            shutil.rmtree(final)
        os.replace(out, final)
    return tar
