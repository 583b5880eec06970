"""Hostile programs: what a policy under RL may type into a desktop's terminal.

Each function returns a shell script that plays one finding of the containment work
(docs/sandbox.md, "Limits"): a fork loop, a disk fill, a memory hog. Every one is
bounded in count, size and time by its arguments, so a test or a soak run that plays
it on a desktop without limits still ends; the limits are what should stop it first.
Each script prints one `HOSTILE <name> key=value ...` line the caller parses
(`report`).

Played by the soak (bench/soak/hostile.py) and the escape suite
(tests/integration/desktop/test_sandbox_escapes.py); the programs only the escape
suite plays (a log flood, a takeover of the channel, a planted directory, a nested
user namespace, the denied system calls) are in tests/tests_support/escape_attacks.py.
"""

from __future__ import annotations

import re

_REPORT = re.compile(r"^HOSTILE (\S+)((?: \S+=\S*)*)$", re.MULTILINE)


def report(output: str, name: str) -> dict[str, str]:
    """The key=value pairs of the `HOSTILE name ...` line in `output` ({} if none)."""
    for match in _REPORT.finditer(output):
        if match.group(1) == name:
            return dict(pair.split("=", 1) for pair in match.group(2).split())
    return {}


def fork_loop(max_procs: int = 5000, seconds: float = 5.0) -> str:
    """Fork up to `max_procs` sleeping children as fast as it can for `seconds` (a
    failed fork is counted, not retried with backoff as bash does), then kill
    them; reports how many it got (`started`) and how many forks failed."""
    return f"""python3 - <<'PY'
import os, signal, time
end, kids, failed = time.monotonic() + {seconds}, [], 0
while len(kids) < {max_procs} and time.monotonic() < end and failed < 200:
    try:
        pid = os.fork()
    except OSError:
        failed += 1
        continue
    if pid == 0:
        time.sleep({seconds} + 5)
        os._exit(0)
    kids.append(pid)
print(f"HOSTILE fork_loop started={{len(kids)}} failed={{failed}}", flush=True)
for pid in kids:
    os.kill(pid, signal.SIGKILL)
for pid in kids:
    os.waitpid(pid, 0)
PY
"""


def disk_fill(path: str = "/home/user/fill", mib: int = 1024) -> str:
    """Write up to `mib` MiB to `path` (stops at the first failed write), report
    how much was written, then delete it."""
    return f"""
dd if=/dev/zero of={path} bs=1M count={mib} 2>/dev/null; rc=$?
written=$(( $(stat -c %s {path} 2>/dev/null || echo 0) >> 20 ))
echo "HOSTILE disk_fill written_mib=$written rc=$rc"
rm -f {path}
"""


def memory_hog(mib: int = 3072, seconds: float = 3.0) -> str:
    """Allocate and touch up to `mib` MiB in one process, hold it `seconds`; reports
    how much it held (an OOM kill inside the desktop ends it early: `held_mib` is
    then what it reached, from its progress file)."""
    return f"""
rm -f /tmp/.hog
python3 - <<'PY' 2>/dev/null
import time
blocks = []
for i in range({mib} // 64):
    blocks.append(bytearray(64 << 20))
    open("/tmp/.hog", "w").write(str((i + 1) * 64))
time.sleep({seconds})
PY
rc=$?
echo "HOSTILE memory_hog held_mib=$(cat /tmp/.hog 2>/dev/null || echo 0) rc=$rc"
rm -f /tmp/.hog
"""
