"""Whether local desktops can start on this machine (shared by test modules)."""

from __future__ import annotations

import functools
import importlib.util
import shutil
import subprocess


@functools.cache
def local_desktops_unavailable() -> str | None:
    """Why local desktops cannot run here, or None when they can."""
    missing = [t for t in ("Xvfb", "openbox", "unshare") if shutil.which(t) is None]
    if missing:
        return f"desktop tools missing: {', '.join(missing)} (run ./setup.sh)"
    if importlib.util.find_spec("cua_guest") is None:
        return "cua_guest is not importable (pip install -e vm/guest)"
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        return f"cannot create mount namespaces here: {probe.stderr.strip()}"
    return None
