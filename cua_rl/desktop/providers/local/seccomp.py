"""The seccomp filter of a local desktop: system calls desktop apps do not need.

bwrap installs it (`--seccomp FD`: a classic BPF program read from a pipe) on the
sandbox's first process, and every process inside inherits it. It denies, with
EPERM, what lets a process reach past its own desktop or into the kernel's
rarely used corners: ptrace and the cross-process memory calls (another
process's memory), `pidfd_getfd` (another process's descriptors), io_uring,
bpf, the key store, mount and the new mount API, kernel modules and kexec,
perf_event_open, userfaultfd, open_by_handle_at, swap, reboot, syslog, acct,
quotactl. x32 system calls and any other ABI than x86-64 (i386 through
`int 0x80`) get ENOSYS, so none of these can be reached under another number.

Small enough to write by hand (a jump per call number), so the launcher needs
no library; on a machine that is not x86-64 no filter is installed (the
provider says so in the session log) until a table for it is added here.
Stdlib only: the launcher imports it on every start.
"""

from __future__ import annotations

import errno
import platform
import struct

AUDIT_ARCH_X86_64 = 0xC000003E
X32_BIT = 0x40000000
DENIED_X86_64 = {
    "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "pidfd_getfd": 438,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "bpf": 321,
    "add_key": 248, "request_key": 249, "keyctl": 250,
    "mount": 165, "umount2": 166, "pivot_root": 155, "open_tree": 428, "move_mount": 429,
    "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442,
    "init_module": 175, "finit_module": 313, "delete_module": 176, "kexec_load": 246,
    "kexec_file_load": 320, "perf_event_open": 298, "userfaultfd": 323,
    "open_by_handle_at": 304, "swapon": 167, "swapoff": 168, "reboot": 169, "syslog": 103,
    "acct": 163, "quotactl": 179,
}
"""Name -> x86-64 number of every denied call (unistd_64.h)."""

_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def program(denied: dict[str, int] | None = None) -> bytes:
    """The filter as bwrap reads it: `struct sock_filter` records, native order."""
    numbers = sorted(set((denied or DENIED_X86_64).values()))
    # Layout: arch check (3), load nr (1), x32 check (1), one JEQ per call, ALLOW, DENY.
    deny_at = 5 + len(numbers) + 1
    out = [
        _insn(_LD_W_ABS, 4),                                  # A = seccomp_data.arch
        _insn(_JEQ_K, AUDIT_ARCH_X86_64, jt=1),               # x86-64: go on
        _insn(_RET_K, _RET_ERRNO | errno.ENOSYS),             # any other ABI
        _insn(_LD_W_ABS, 0),                                  # A = seccomp_data.nr
        _insn(_JGE_K, X32_BIT, jt=deny_at - 5),               # x32 numbers: denied
    ]
    for i, number in enumerate(numbers):
        out.append(_insn(_JEQ_K, number, jt=deny_at - (5 + i + 1)))
    out += [_insn(_RET_K, _RET_ALLOW), _insn(_RET_K, _RET_ERRNO | errno.EPERM)]
    return b"".join(out)


def supported() -> bool:
    """Whether this machine's ABI has a table here (x86-64 only so far)."""
    return platform.machine() in ("x86_64", "AMD64")
