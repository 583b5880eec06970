"""The local desktops' seccomp filter for each architecture, checked here by running
the compiled classic BPF program on a small interpreter of the four instructions it
uses (the arm64 one cannot be loaded on this x86-64 machine): every denied call gets
EPERM, other calls pass, other ABIs get ENOSYS; the tables agree with the kernel
headers where the machine has them; the container profile comes from the same list."""

from __future__ import annotations

import errno
import json
import re
import struct
from pathlib import Path

import pytest

from cua_rl.desktop.providers.container.seccomp import CLONE_NEW_FLAGS, profile, write_profile
from cua_rl.desktop.providers.local.seccomp import (
    ARCHES,
    AUDIT_ARCH_AARCH64,
    AUDIT_ARCH_X86_64,
    DENIED,
    X32_BIT,
    program,
)

ALLOW, EPERM, ENOSYS = 0x7FFF0000, 0x00050000 | errno.EPERM, 0x00050000 | errno.ENOSYS
HEADERS = {
    "x86_64": ("/usr/include/x86_64-linux-gnu/asm/unistd_64.h", r"__NR_"),
    "aarch64": ("/usr/include/asm-generic/unistd.h", r"__NR(?:3264)?_"),
}
ALLOWED_CALLS = {
    "x86_64": {"read": 0, "openat": 257, "clone": 56, "unshare": 272},
    "aarch64": {"read": 63, "openat": 56, "clone": 220, "unshare": 97},
}


def run_filter(code: bytes, arch: int, nr: int) -> int:
    """What the program returns for a call `nr` of audit arch `arch` (seccomp_data:
    nr at offset 0, arch at 4). Only the instructions the filter uses exist here."""
    insns = [struct.unpack("=HBBI", code[i : i + 8]) for i in range(0, len(code), 8)]
    acc, pc = 0, 0
    for _ in range(len(insns)):  # forward jumps only: at most one pass
        op, jt, jf, k = insns[pc]
        if op == 0x20:  # BPF_LD | BPF_W | BPF_ABS
            acc = {0: nr, 4: arch}[k]
            pc += 1
        elif op == 0x15:  # BPF_JMP | BPF_JEQ | BPF_K
            pc += 1 + (jt if acc == k else jf)
        elif op == 0x35:  # BPF_JMP | BPF_JGE | BPF_K
            pc += 1 + (jt if acc >= k else jf)
        elif op == 0x06:  # BPF_RET | BPF_K
            return k
        else:
            raise AssertionError(f"instruction {op:#x} at {pc} is not one the filter uses")
        assert 0 <= pc < len(insns), pc
    raise AssertionError("the program did not return")


@pytest.mark.parametrize("arch", sorted(ARCHES))
def test_each_denied_call_gets_eperm_and_others_pass(arch: str) -> None:
    table = ARCHES[arch]
    code = program(arch)
    assert len(code) % 8 == 0 and len(code) // 8 <= 4096  # the kernel's BPF_MAXINSNS
    assert set(table.numbers) == set(DENIED)
    for name in DENIED:
        assert run_filter(code, table.audit, table.numbers[name]) == EPERM, name
    for name, nr in ALLOWED_CALLS[arch].items():
        assert run_filter(code, table.audit, nr) == ALLOW, name
    other = AUDIT_ARCH_AARCH64 if arch == "x86_64" else AUDIT_ARCH_X86_64
    assert run_filter(code, other, table.numbers["ptrace"]) == ENOSYS  # another ABI
    assert run_filter(code, 0x40000003, 26) == ENOSYS  # i386 / 32-bit ARM compat tasks
    x32_read = X32_BIT | ALLOWED_CALLS[arch]["read"]
    assert run_filter(code, table.audit, x32_read) == (EPERM if table.x32 else ALLOW)


@pytest.mark.parametrize("arch", sorted(ARCHES))
def test_the_tables_match_the_kernel_headers(arch: str) -> None:
    path, prefix = HEADERS[arch]
    if not Path(path).is_file():
        pytest.skip(f"{path} not installed (linux-libc-dev)")
    defined = dict(re.findall(rf"#define {prefix}(\w+)\s+(\d+)\b", Path(path).read_text()))
    assert {n: str(v) for n, v in ARCHES[arch].numbers.items()} == {
        n: defined.get(n) for n in ARCHES[arch].numbers
    }


def test_the_container_profile_denies_the_same_calls_and_new_namespaces(tmp_path: Path) -> None:
    data = profile()
    assert data["defaultAction"] == "SCMP_ACT_ALLOW"
    rules = data["syscalls"]
    denied = {
        n
        for r in rules
        if r["action"] == "SCMP_ACT_ERRNO" and "args" not in r and r["errnoRet"] == errno.EPERM
        for n in r["names"]
    }
    assert denied == {*DENIED, "unshare", "setns"}
    clone = [r["args"][0] for r in rules if r["names"] == ["clone"]]
    assert sorted(a["value"] for a in clone) == sorted(CLONE_NEW_FLAGS.values())
    assert all(
        a["op"] == "SCMP_CMP_MASKED_EQ" and a["value"] == a["valueTwo"] and a["index"] == 0
        for a in clone
    )
    assert [r["errnoRet"] for r in rules if r["names"] == ["clone3"]] == [errno.ENOSYS]
    arches = {m["architecture"] for m in data["archMap"]}
    assert arches == {"SCMP_ARCH_X86_64", "SCMP_ARCH_AARCH64"}
    path = write_profile(tmp_path)
    assert json.loads(path.read_text()) == data and write_profile(tmp_path) == path
    assert [p.name for p in tmp_path.iterdir()] == [path.name]
