"""VS Code on local desktops: the `code` script of every cua-rl desktop
(`images.vscode_script`, which says what it does) over the code-server install
`./setup.sh` builds.

`./setup.sh` (`vscode_setup`, running `cua_rl/images/code-server.sh`) builds
code-server from the npm registry, with a Node 20 of its own, into
`CODE_SERVER_DIR`; the session binds that directory read-only at
`CODE_SERVER_MOUNT` and passes `code_script()` into the sandbox as
`SHIM_BIN/code` (first on PATH), as it does the google-chrome shim.

Stdlib only: the session launcher imports this on every (re)start.
"""

from __future__ import annotations

import os

from cua_rl.images.vscode_script import (
    CODE_PORT,
    CODE_SERVER_MOUNT,
    CODE_SERVER_VERSION,
    WINDOW_PROFILE,
    code_script,
)

__all__ = [
    "CODE_PORT",
    "CODE_SERVER_DIR",
    "CODE_SERVER_MOUNT",
    "CODE_SERVER_VERSION",
    "READY_MARK",
    "WINDOW_PROFILE",
    "code_script",
    "install_dir",
]

CODE_SERVER_DIR = f"/opt/cua-rl/code-server-{CODE_SERVER_VERSION}"
"""Where `./setup.sh` installs it (`node/`, `node_modules/code-server/`)."""
READY_MARK = ".cua-rl-ready"
"""Written by the build last: a half-built install never counts."""


def install_dir() -> str | None:
    """The finished code-server install (`CODE_SERVER_DIR`), or None when setup.sh
    has not built it."""
    return CODE_SERVER_DIR if os.path.isfile(os.path.join(CODE_SERVER_DIR, READY_MARK)) else None
