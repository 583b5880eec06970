"""`python -m cua_rl.desktop.providers.owner_watch --owner PID --group PGID`: a
watcher that kills a desktop's process group when the run that owns it dies, even by
SIGKILL, and exits by itself once the group is gone.

For providers whose desktop is one process group with no supervisor of ours inside
(a QEMU); local desktops' launcher and container desktops' forwarder watch their
owner themselves. It waits on pidfds (no polling, no pid reuse): the owner's, and
the group leader's.
"""

from __future__ import annotations

import argparse
import os
import select
import signal
import subprocess
import sys

TERM_GRACE_S = 3.0


def spawn(owner_pid: int, group: int) -> subprocess.Popen:
    """Start a watcher for `group` bound to `owner_pid` (a session of its own, so a
    signal to the owner's group does not reach it first)."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cua_rl.desktop.providers.owner_watch",
            "--owner",
            str(owner_pid),
            "--group",
            str(group),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        cwd="/",
    )


def _kill_group(group: int, leader_fd: int) -> None:
    for sig, grace in ((signal.SIGTERM, TERM_GRACE_S), (signal.SIGKILL, TERM_GRACE_S)):
        try:
            os.killpg(group, sig)
        except ProcessLookupError:
            return
        if select.select([leader_fd], [], [], grace)[0]:
            return


def watch(owner_pid: int, group: int) -> int:
    try:
        leader = os.pidfd_open(group)
    except ProcessLookupError:
        return 0  # the desktop is gone already
    try:
        owner = os.pidfd_open(owner_pid)
    except ProcessLookupError:  # the owner died before we looked
        _kill_group(group, leader)
        return 0
    ready, _, _ = select.select([owner, leader], [], [])
    if owner in ready:
        _kill_group(group, leader)
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--owner", type=int, required=True)
    parser.add_argument("--group", type=int, required=True)
    args = parser.parse_args()
    sys.exit(watch(args.owner, args.group))


if __name__ == "__main__":
    main()
