"""The seccomp filter of a local desktop: system calls desktop apps do not need.

bwrap installs it (`--seccomp FD`: a classic BPF program read from a pipe) on the
sandbox's first process, and every process inside inherits it. It denies, with
EPERM, what lets a process reach past its own desktop or into the kernel's
rarely used corners: ptrace and the cross-process memory calls (another
process's memory), `pidfd_getfd` (another process's descriptors), io_uring,
bpf, the key store, mount and the new mount API, kernel modules and kexec,
perf_event_open, userfaultfd, open_by_handle_at, swap, reboot, syslog, acct,
quotactl (`DENIED`). Any other ABI than the machine's own gets ENOSYS, so none of
these can be reached under another number: on x86-64 the x32 calls and i386
through `int 0x80`, on arm64 32-bit ARM (compat) tasks.

One list of names, a table of numbers per architecture (x86-64 from
`asm/unistd_64.h`, arm64 from the generic `asm-generic/unistd.h` it uses; the calls
added since Linux 5.1 have one number on every architecture). The container
provider's seccomp profile is made from the same list (`container.seccomp`).

Small enough to write by hand (a jump per call number), so the launcher needs
no library. Stdlib only: the launcher imports it on every start.
"""

from __future__ import annotations

import errno
import platform
import struct

DENIED = (
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_getfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "bpf",
    "add_key",
    "request_key",
    "keyctl",
    "mount",
    "umount2",
    "pivot_root",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "perf_event_open",
    "userfaultfd",
    "open_by_handle_at",
    "swapon",
    "swapoff",
    "reboot",
    "syslog",
    "acct",
    "quotactl",
)
"""Every denied system call, by name (the same on every architecture)."""

_NEW_CALLS = {
    "pidfd_getfd": 438,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "mount_setattr": 442,
}
"""Calls added since Linux 5.1: one number on every architecture."""

OLD_CALLS = {
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "bpf": (321, 280),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "keyctl": (250, 219),
    "mount": (165, 40),
    "umount2": (166, 39),
    "pivot_root": (155, 41),
    "init_module": (175, 105),
    "finit_module": (313, 273),
    "delete_module": (176, 106),
    "kexec_load": (246, 104),
    "kexec_file_load": (320, 294),
    "perf_event_open": (298, 241),
    "userfaultfd": (323, 282),
    "open_by_handle_at": (304, 265),
    "swapon": (167, 224),
    "swapoff": (168, 225),
    "reboot": (169, 142),
    "syslog": (103, 116),
    "acct": (163, 89),
    "quotactl": (179, 60),
}
"""Name -> (x86-64 number, arm64 number) of every denied call older than Linux 5.1
(asm/unistd_64.h, asm-generic/unistd.h)."""

DENIED_X86_64 = {**{name: nums[0] for name, nums in OLD_CALLS.items()}, **_NEW_CALLS}
"""Name -> x86-64 number of every denied call."""
DENIED_AARCH64 = {**{name: nums[1] for name, nums in OLD_CALLS.items()}, **_NEW_CALLS}
"""Name -> arm64 number of every denied call."""

AUDIT_ARCH_X86_64 = 0xC000003E
AUDIT_ARCH_AARCH64 = 0xC00000B7
X32_BIT = 0x40000000


class Arch:
    """One architecture's filter table: its audit arch, numbers, and whether it has
    an x32-like sub-ABI in the same audit arch (numbers with `X32_BIT` set)."""

    def __init__(self, audit: int, numbers: dict[str, int], x32: bool) -> None:
        self.audit, self.numbers, self.x32 = audit, numbers, x32


ARCHES = {
    "x86_64": Arch(AUDIT_ARCH_X86_64, DENIED_X86_64, x32=True),
    "aarch64": Arch(AUDIT_ARCH_AARCH64, DENIED_AARCH64, x32=False),
}
"""`platform.machine()` (normalized by `machine`) -> its table."""

_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def machine() -> str:
    """This machine's architecture as the tables name it (`AMD64`, `arm64` too)."""
    name = platform.machine()
    return {"AMD64": "x86_64", "arm64": "aarch64"}.get(name, name)


def program(arch: str = "x86_64") -> bytes:
    """The filter for `arch` as bwrap reads it: `struct sock_filter` records, in this
    machine's byte order (the kernel that loads it is this machine's)."""
    table = ARCHES[arch]
    numbers = sorted(set(table.numbers.values()))
    missing = set(DENIED) - set(table.numbers)
    if missing:
        raise ValueError(f"{arch}: no number for {sorted(missing)}")
    # Layout: arch check (3), load nr (1), [x32 check (1)], one JEQ per call, ALLOW, DENY.
    head = 5 if table.x32 else 4
    deny_at = head + len(numbers) + 1
    out = [
        _insn(_LD_W_ABS, 4),  # A = seccomp_data.arch
        _insn(_JEQ_K, table.audit, jt=1),  # this ABI: go on
        _insn(_RET_K, _RET_ERRNO | errno.ENOSYS),  # any other ABI
        _insn(_LD_W_ABS, 0),  # A = seccomp_data.nr
    ]
    if table.x32:
        out.append(_insn(_JGE_K, X32_BIT, jt=deny_at - 5))  # x32 numbers: denied
    for i, number in enumerate(numbers):
        out.append(_insn(_JEQ_K, number, jt=deny_at - (head + i + 1)))
    out += [_insn(_RET_K, _RET_ALLOW), _insn(_RET_K, _RET_ERRNO | errno.EPERM)]
    return b"".join(out)


def supported() -> bool:
    """Whether this machine's architecture has a table here (x86-64, arm64)."""
    return machine() in ARCHES
