"""Provider-specific variants of two escape-suite checks (tests/integration/desktop/
test_sandbox_escapes.py): a VM's neighbour is a QEMU process, not processes the agent
could signal; a container shares its run dir with the host, a local desktop does not."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import psutil

from cua_rl.desktop import attack_scripts
from tests_support import escape_attacks
from tests_support.escape_scene import Scene


async def neighbours_vm_cannot_be_signalled(scene: Scene) -> None:
    """A VM's processes live in its own kernel: the host's process for the neighbour
    is its QEMU, which the agent can neither see nor signal; and QEMU does not run as
    root on the host (run_as), so a break out of the emulator would not hold root."""
    qemu = psutil.Process(scene.b.info["pid"])
    assert qemu.is_running() and "qemu" in qemu.name(), qemu
    rc, out = await scene.run(
        f"ls /proc/{qemu.pid}/cmdline && echo SEEN; kill -KILL {qemu.pid} && echo KILLED"
    )
    assert "SEEN" not in out and "KILLED" not in out, out
    assert qemu.is_running()
    assert qemu.uids().real != 0 and qemu.uids().effective != 0, qemu.uids()
    assert await scene.provider.health(scene.b)


RUN_DIR_ENTRIES = ["cdp.sock", "guest.sock", "token"]
"""A container's run dir: the guest's and Chromium's DevTools' sockets (both the root
init's) and the host's token."""


async def planted_run_dir_does_not_break_the_reset(scene: Scene) -> None:
    """Containers share their run dir with the host: it is root's (the agent can
    write nothing there) and a 1 MiB tmpfs of 64 inodes, emptied by the host (never
    following a link) before the next container starts. What the agent plants
    wherever it may write does not break the reset."""
    rc, out = await scene.run(
        escape_attacks.plant()
        + "for i in $(seq 100); do touch /run/cua/f$i; done 2>/dev/null;"
        + attack_scripts.disk_fill("/run/cua/fill", 64).replace("rm -f", ": ")
        + "for d in /tmp /var/tmp /dev/shm /home/user; do mkdir $d/guest.sock; "
        + "ln -s /run/cua/guest.sock $d/link; done; "
        + "echo HOSTILE run_dir kib=$(du -sk /run/cua | cut -f1)"
    )
    made = attack_scripts.report(out, "plant").get("made", "")
    # (`mkdir -p /run/cua` succeeds: it exists; nothing can be made inside it)
    assert "/tmp/planted_dir" in made and "/run/cua/" not in made and "link" not in made, out
    run_dir = Path(scene.a.info["run_dir"])
    mounted = await asyncio.to_thread(os.path.ismount, run_dir)
    assert mounted, "the run dir is not its own tmpfs (is the provider root?)"
    assert int(attack_scripts.report(out, "disk_fill")["written_mib"]) == 0, out
    entries = await asyncio.to_thread(lambda: sorted(p.name for p in run_dir.iterdir()))
    assert entries == RUN_DIR_ENTRIES, entries
    handle = await scene.provider.reset(scene.a)
    assert await scene.provider.health(handle)
    entries = await asyncio.to_thread(lambda: sorted(p.name for p in run_dir.iterdir()))
    assert entries == RUN_DIR_ENTRIES, entries
    scene.a, scene.agent = handle, scene.provider.client(handle)
