"""Whether local desktops can start on this machine (shared by test modules)."""

from __future__ import annotations

import functools
import importlib.util
import shutil
import subprocess


@functools.cache
def local_desktops_unavailable() -> str | None:
    """Why local desktops cannot run here, or None when they can."""
    missing = [
        t for t in ("Xvfb", "openbox", "unshare", "bwrap", "socat") if shutil.which(t) is None
    ]
    if missing:
        return f"desktop tools missing: {', '.join(missing)} (run ./setup.sh)"
    if importlib.util.find_spec("cua_guest") is None:
        return "cua_guest is not importable (pip install -e vm/guest)"
    probe = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "true"], capture_output=True, text=True
    )
    if probe.returncode != 0:
        return f"cannot create mount namespaces here: {probe.stderr.strip()}"
    return None


async def guest_ready(url: str, token: str, deadline_s: float = 60.0) -> bool:
    """Whether a guest server answers its readiness probe before the deadline (the
    fixtures that start one report its log when it does not)."""
    from cua_rl.desktop.client import GuestClient
    from cua_rl.errors import GuestUnavailable

    async with GuestClient(url, token, timeout=5.0) as client:
        try:
            await client.wait_ready(deadline_s=deadline_s)
        except GuestUnavailable:
            return False
    return True
