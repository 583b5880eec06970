"""A real guest server behind each of moto's EC2 instances, which have none: the aws
provider's `guest_url` and `probe` hooks point an instance at its own guest, started
on first probe in a mount namespace of its own (a private tmpfs /tmp holding its
home), so two instances share no file and a replaced instance starts empty, as EC2
machines do. All share one Xvfb (reached by its abstract socket, which the private
/tmp does not hide)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path
from typing import Any

from cua_rl.desktop.providers.base import DesktopHandle
from tests_support.servers import free_port

PRIVATE_TMP = (
    'keep=$(mktemp -d /run/cua-keep.XXXXXX) && mount --rbind /tmp "$keep" '
    "&& mount -t tmpfs -o size=64m tmpfs /tmp "
    '&& for d in $CUA_KEEP_TMP; do mkdir -p "/tmp/$d" && mount --rbind "$keep/$d" "/tmp/$d" '
    '|| exit 1; done && umount -l "$keep" && rmdir "$keep" '
    '&& mkdir -p /tmp/home/Desktop && HOME=/tmp/home exec "$@"'
)
"""Each guest's own /tmp (a tmpfs in a mount namespace of its own), with the folders of
the original /tmp that hold this interpreter or this checkout bound back in: a clone
under /tmp (CI's may live there) keeps its venv and its guest package."""


def _kept_in_tmp() -> str:
    """The names under /tmp of the folders the guest's interpreter and code live in."""
    tmp = Path("/tmp").resolve()
    names = set()
    for path in (Path(sys.prefix), Path(sys.executable), Path(__file__)):
        resolved = path.resolve()
        if resolved.is_relative_to(tmp) and resolved != tmp:
            names.add(resolved.relative_to(tmp).parts[0])
    return " ".join(sorted(names))


class InstanceGuests:
    """One guest per instance id; `close` kills them all."""

    def __init__(self, display: str, token: str, log_dir: Path) -> None:
        self.display, self.token, self.log_dir = display, token, log_dir
        self._ports: dict[str, int] = {}
        self._procs: dict[str, asyncio.subprocess.Process] = {}

    def url(self, instance: dict[str, Any]) -> str:
        """The guest URL of an instance (its port is fixed on first sight)."""
        port = self._ports.setdefault(instance["InstanceId"], free_port())
        return f"http://127.0.0.1:{port}"

    async def probe(self, handle: DesktopHandle, deadline_s: float) -> None:
        """Start the instance's guest (once) and wait until it answers."""
        instance_id = str(handle.info["instance_id"])
        if instance_id not in self._procs:
            port = int(handle.url.rsplit(":", 1)[1])
            env = {
                **os.environ,
                "DISPLAY": self.display,
                "CUA_GUEST_TOKEN": self.token,
                "CUA_KEEP_TMP": _kept_in_tmp(),
            }
            with (self.log_dir / f"{instance_id}.log").open("wb") as log:
                self._procs[instance_id] = await asyncio.create_subprocess_exec(
                    "unshare",
                    "--mount",
                    "--propagation",
                    "private",
                    "--",
                    "sh",
                    "-c",
                    PRIVATE_TMP,
                    "sh",
                    sys.executable,
                    "-m",
                    "cua_guest",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    env=env,
                    stdout=log,
                    stderr=log,
                    start_new_session=True,
                )
        async with handle.guest_client() as client:
            await client.wait_ready(deadline_s, interval_s=0.05)

    async def close(self) -> None:
        for proc in self._procs.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
        self._procs.clear()
