"""The hostile programs only the escape suite (tests/integration/desktop/
test_sandbox_escapes.py) plays: a log flood (through every stderr reachable, and from
`/act`), a planted directory and a takeover of the host<->guest channel, a nested user
namespace, the system calls a desktop's seccomp filter denies. Those the soak plays too
(fork loop, disk fill, memory hog) and the parser of every program's `HOSTILE <name>
key=value ...` line (`report`) are in `cua_rl.desktop.attack_scripts`; each here is
bounded in count, size and time by its arguments as those are."""

from __future__ import annotations


def log_flood(mib: int = 50) -> str:
    """Write `mib` MiB to every stderr the agent can reach: fd 1 and 2 of every other
    process of the desktop, opened through /proc or copied with `pidfd_getfd` (the
    session's Xvfb, bus, window manager and shell hold the launcher's pipe)."""
    return f"""
python3 - <<'PY'
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
chunk, got = b"F" * (1 << 20), set()
for pid in [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]:
    for fd in (1, 2):
        try:
            target = os.open(f"/proc/{{pid}}/fd/{{fd}}", os.O_WRONLY)
        except OSError:
            pidfd = libc.syscall(434, pid, 0)  # pidfd_open
            target = libc.syscall(438, pidfd, fd, 0) if pidfd >= 0 else -1  # pidfd_getfd
        if target < 0 or os.fstat(target).st_ino in got or os.path.samestat(
                os.fstat(target), os.fstat(1)):
            continue
        got.add(os.fstat(target).st_ino)
        for _ in range({mib}):
            try:
                os.write(target, chunk)
            except OSError:
                break
print(f"HOSTILE log_flood targets={{len(got)}}")
PY
"""


def act_log_flood(mib: int = 50) -> str:
    """pyautogui-side flood for `/act`: `mib` writes of 1 MiB straight to fd 1 and 2."""
    return (
        "import os\n"
        f"for _ in range({mib}):\n"
        "    for fd in (1, 2):\n"
        "        try:\n"
        "            os.write(fd, b'F' * (1 << 20))\n"
        "        except OSError:\n"
        "            pass\n"
    )


def plant(socket_dir: str = "/run/cua") -> str:
    """Plant a directory, a link and a file where the channel's socket used to be
    and wherever else the agent can write; report which it managed."""
    return f"""
made=""
for p in {socket_dir} {socket_dir}/planted_dir /run/cua-rl-stage/planted /tmp/planted_dir; do
  mkdir -p "$p" 2>/dev/null && made="$made,$p"
done
ln -s /etc/passwd {socket_dir}/guest.sock 2>/dev/null && made="$made,link"
echo "HOSTILE plant made=${{made#,}}"
"""


def takeover(socket_dir: str = "/run/cua") -> str:
    """Try to take the host<->guest channel over: rename, remove or replace the
    guest's socket, create a file, a directory or a link beside it, and bind a
    live listener at its path or a new one; report which of them worked."""
    return f"""
d={socket_dir}; made=""
mv $d/guest.sock $d/guest.sock.real 2>/dev/null && made="$made,rename"
rm -f $d/guest.sock 2>/dev/null && [ ! -e $d/guest.sock ] && made="$made,remove"
touch $d/planted 2>/dev/null && made="$made,file"
mkdir $d/planted_dir 2>/dev/null && made="$made,dir"
ln -s /etc/passwd $d/planted_link 2>/dev/null && made="$made,link"
for name in guest.sock listener.sock; do
  python3 -c "import socket, sys; s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); \
s.listen()" $d/$name 2>/dev/null && made="$made,bind-$name"
done
echo "HOSTILE takeover made=${{made#,}} done=1"
"""


def nested_userns() -> str:
    """Try to become root in a new user namespace (`unshare -Ur`)."""
    return """
out=$(unshare -Ur id -u 2>&1); rc=$?
echo "HOSTILE nested_userns rc=$rc uid=$(echo "$out" | tr -c '0-9' _ | head -c 20)"
"""


def denied_calls() -> str:
    """Try the system calls a desktop's seccomp filter denies (x86-64 numbers) on a
    sibling process of the desktop; reports each call's errno (0: it worked)."""
    return """python3 - <<'PY'
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
child = os.fork()
if child == 0:
    time.sleep(5)
    os._exit(0)
def call(nr, *args):
    ctypes.set_errno(0)
    rc = libc.syscall(nr, *args)
    return 0 if rc >= 0 else ctypes.get_errno()
pidfd = libc.syscall(434, child, 0)  # pidfd_open: allowed
found = {
    "ptrace": call(101, 16, child, 0, 0),  # PTRACE_ATTACH
    "pidfd_getfd": call(438, pidfd, 1, 0),
    "io_uring_setup": call(425, 8, ctypes.create_string_buffer(120)),
    "bpf": call(321, 0, 0, 0),
    "keyctl": call(250, 0, 0, 0),
    "mount": call(165, b"none", b"/tmp", b"tmpfs", 0, 0),
    "process_vm_readv": call(310, child, 0, 0, 0, 0, 0),
}
os.kill(child, 9)
print("HOSTILE denied_calls " + " ".join(f"{k}={v}" for k, v in found.items()))
PY
"""
