"""The seccomp profile of a container desktop, made from the local desktops' deny list.

Docker's default profile (and podman's) allowed what our local desktops' filter
denies: ptrace of the agent's own processes and io_uring (Docker 20.10). This
profile takes the list of `local.seccomp.DENIED` (EPERM), the same calls on the same
terms, and adds what a container lacks that bwrap gives a local desktop: bwrap
refuses nested user namespaces itself (`--disable-userns`), a container does not, so
`unshare`, `setns` and a `clone` with any CLONE_NEW* flag are denied too, and
`clone3` (whose flags are in memory, out of seccomp's sight) answers ENOSYS, on
which libc falls back to `clone`. Everything else is allowed: the engine's other
guards stay, `--cap-drop ALL` (the kernel refuses what needs a capability: modules,
raw I/O, the clock, chroot...) and no-new-privileges.

The engine picks the architectures from `archMap` for its host: x86-64 with its
i386 and x32 ABIs, arm64 with 32-bit ARM, so a denied call is denied under every
ABI's number (libseccomp resolves the names per architecture).

Written as JSON by the provider (`write_profile`: one file per content, in the
state dir) and passed as `--security-opt seccomp=FILE`; the aws fleet's hosts get
the same text in their user data (aws/fleet.py).
"""

from __future__ import annotations

import errno
import hashlib
import json
from pathlib import Path
from typing import Any

from cua_rl.atomic_file import write_text_atomic
from cua_rl.desktop.providers.local.seccomp import DENIED

NAMESPACE_CALLS = ("unshare", "setns")
"""Denied outright in containers: they make or join namespaces (module doc)."""
CLONE_NEW_FLAGS = {
    "CLONE_NEWNS": 0x00020000,
    "CLONE_NEWCGROUP": 0x02000000,
    "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000,
    "CLONE_NEWUSER": 0x10000000,
    "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000,
}
"""`clone` flags that make a namespace; a clone with any of them is denied (its flags
are its first argument on x86 and arm)."""
ARCH_MAP = [
    {"architecture": "SCMP_ARCH_X86_64", "subArchitectures": ["SCMP_ARCH_X86", "SCMP_ARCH_X32"]},
    {"architecture": "SCMP_ARCH_AARCH64", "subArchitectures": ["SCMP_ARCH_ARM"]},
]


def profile() -> dict[str, Any]:
    """The profile (module doc), in the engines' JSON format."""
    deny = {"action": "SCMP_ACT_ERRNO", "errnoRet": errno.EPERM}
    rules: list[dict[str, Any]] = [
        {
            "names": sorted(DENIED),
            **deny,
            "comment": "the local desktops' filter (cua_rl.desktop.providers.local.seccomp)",
        },
        {"names": list(NAMESPACE_CALLS), **deny, "comment": "no nested namespaces"},
        {
            "names": ["clone3"],
            "action": "SCMP_ACT_ERRNO",
            "errnoRet": errno.ENOSYS,
            "comment": "its flags are out of seccomp's sight; libc falls back to clone",
        },
    ]
    for name, bit in CLONE_NEW_FLAGS.items():
        rules.append(
            {
                "names": ["clone"],
                **deny,
                "comment": f"clone with {name}",
                "args": [{"index": 0, "value": bit, "valueTwo": bit, "op": "SCMP_CMP_MASKED_EQ"}],
            }
        )
    return {"defaultAction": "SCMP_ACT_ALLOW", "archMap": ARCH_MAP, "syscalls": rules}


def profile_text() -> str:
    return json.dumps(profile(), indent=1, sort_keys=True) + "\n"


def profile_path(directory: Path) -> Path:
    """Where `write_profile` puts this profile: `directory/seccomp-<hash>.json`."""
    digest = hashlib.sha256(profile_text().encode()).hexdigest()[:16]
    return directory / f"seccomp-{digest}.json"


def write_profile(directory: Path) -> Path:
    """`profile_path(directory)`, written once (atomically) and then reused; the
    file for `--security-opt seccomp=`."""
    text = profile_text()
    path = profile_path(directory)
    if path.is_file() and path.read_text() == text:
        return path
    write_text_atomic(path, text, mode=0o644)
    return path
