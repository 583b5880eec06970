"""What a long run holds, sampled every few seconds from outside it (`bench soak`).

A leak shows as growth over time, so the soak needs the same figures at regular
intervals: for the run's process and every process it started (model-server
replicas, learner ranks, desktop launchers, Xvfb, guests, forwarders), found by
walking the process tree with psutil: RSS, open file descriptors, threads, child
processes; the run directory's size by part (the SQLite store with its WAL,
screenshots, checkpoints, logs, spans, exports); host free memory and disk.

The sampler is a thread of the soak driver, a separate process from the run, so it
never shares an event loop with the run; each sample is one JSON line appended to
`samples.jsonl` (flushed as written: a soak cut short keeps what it sampled).

A process is named by what it is plus its pid (`model-server:policy-0#1234`): a
restarted replica is a new process with a new pid, and growth is measured per
process (pid and start time), never across a restart. A name may get better
while a process lives (a replica's port is named by its log once the log exists):
readers take the newest.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from cua_rl.runtime.telemetry.replica_logs import ReplicaLogs

log = logging.getLogger(__name__)

MB = 1024 * 1024

DIR_PARTS: dict[str, tuple[str, ...]] = {
    "store": ("run.sqlite", "run.sqlite-wal", "run.sqlite-shm"),
    "screenshots": ("screenshots",),
    "checkpoints": ("checkpoints",),
    "exports": ("exports",),
    "logs": ("logs", "metrics.jsonl", "tensorboard"),
    "spans": ("spans",),
    "work": ("work", "recordings"),
}
"""Parts of a run directory (docs/run-directory.md) -> the names under it they
cover; anything else counts as `other`."""


EXECUTABLES = {
    "Xvfb": "xvfb",
    "bwrap": "desktop-sandbox",
    "socat": "forwarder",
    "bash": "shell",
    "sh": "shell",
}
MODULES = (
    ("cua_rl.learner.rank_process", "learner-rank"),
    ("cua_guest.fd_forward", "guest-forwarder"),
    ("cua_guest.act_child", "guest-act"),
    ("cua_guest", "guest"),
    ("cua_rl.desktop.unix_forward", "forwarder"),
    ("cua_rl.desktop.providers.local.session", "desktop-launcher"),
)
"""`python -m MODULE` -> kind (the first prefix that matches)."""


def process_label(cmdline: list[str], ports: dict[int, str]) -> str:
    """What a process of the run is, from its executable or `-m` module (never from
    words inside its arguments: a sandbox's arguments name the programs it runs)."""
    text = " ".join(cmdline)
    exe = os.path.basename(cmdline[0]) if cmdline else ""
    port = re.search(r"--port[ =](\d+)", text)
    module = cmdline[cmdline.index("-m") + 1] if "-m" in cmdline[:-1] else ""
    if port and (
        (module == "cua_rl.cli" and "serve" in cmdline) or module.startswith("vllm.entrypoints")
    ):
        return f"model-server:{ports.get(int(port.group(1)), port.group(1))}"
    if exe.startswith("VLLM::"):
        return "vllm-" + exe.split("::", 1)[1].lower()
    if exe in EXECUTABLES:
        return EXECUTABLES[exe]
    if module == "cua_rl.cli" and {"train", "rollout", "eval"} & set(cmdline):
        return "run"
    for prefix, label in MODULES:
        if module == prefix or module.startswith(prefix + "."):
            return label
    return exe or "?"


def attribute_to_servers(procs: list[dict[str, Any]]) -> None:
    """Name the helpers of a model server after its pool (`vllm-worker:policy-0`):
    the nearest model-server ancestor within the same sample."""
    by_pid = {p["pid"]: p for p in procs}
    for proc in procs:
        kind = proc["name"].rsplit("#", 1)[0]
        if kind.startswith("model-server:"):
            continue
        parent, hops = by_pid.get(proc["ppid"]), 0
        while parent is not None and hops < 8:
            parent_kind = parent["name"].rsplit("#", 1)[0]
            if parent_kind.startswith("model-server:"):
                proc["name"] = f"{kind}:{parent_kind.split(':', 1)[1]}#{proc['pid']}"
                break
            parent, hops = by_pid.get(parent["ppid"]), hops + 1


def process_tree(root_pid: int) -> list[psutil.Process]:
    """The root and its live descendants (empty when the root is gone)."""
    try:
        root = psutil.Process(root_pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def sample_process(proc: psutil.Process, ports: dict[int, str]) -> dict[str, Any] | None:
    """One process's figures, None when it ended meanwhile (or is a zombie)."""
    try:
        with proc.oneshot():
            if proc.status() == psutil.STATUS_ZOMBIE:
                return None
            cmdline = proc.cmdline()
            return {
                "pid": proc.pid,
                "ppid": proc.ppid(),
                "started": proc.create_time(),
                "name": f"{process_label(cmdline, ports)}#{proc.pid}",
                "rss_mb": round(proc.memory_info().rss / MB, 2),
                "fds": proc.num_fds(),
                "threads": proc.num_threads(),
                "children": len(proc.children()),
                "cmd": " ".join(cmdline)[:300],
            }
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return None


def tree_size_mb(path: Path) -> float:
    """Bytes under `path` (a file or a directory tree, links not followed) in MB;
    files that vanish while walked (a checkpoint being replaced) count as 0."""
    try:
        if not path.is_dir() or path.is_symlink():
            return path.lstat().st_size / MB
    except OSError:
        return 0.0
    total, stack = 0, [path]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(Path(entry.path))
                else:
                    total += entry.stat(follow_symlinks=False).st_size
            except OSError:
                continue
    return total / MB


def run_dir_sizes(run_dir: Path) -> dict[str, float]:
    """The run directory's MB by part (DIR_PARTS), `other` and `total`."""
    out = {part: 0.0 for part in DIR_PARTS}
    out["other"] = 0.0
    owner = {name: part for part, names in DIR_PARTS.items() for name in names}
    try:
        entries = list(run_dir.iterdir())
    except OSError:
        entries = []
    for entry in entries:
        out[owner.get(entry.name, "other")] += tree_size_mb(entry)
    out = {k: round(v, 3) for k, v in out.items()}
    out["total"] = round(sum(out.values()), 3)
    return out


def host_figures(path: Path) -> dict[str, float]:
    """Host memory available and free disk where the run directory lives, in MB."""
    try:
        free_disk = psutil.disk_usage(str(path)).free / MB
    except OSError:
        free_disk = float("nan")
    return {
        "mem_available_mb": round(psutil.virtual_memory().available / MB, 1),
        "disk_free_mb": round(free_disk, 1),
    }


def take_sample(
    root_pid: int, run_dir: Path, t0: float, ports: dict[int, str] | None = None
) -> dict[str, Any]:
    """One sample: `t` (seconds since t0, wall clock), the processes, the run
    directory and the host."""
    procs = [s for p in process_tree(root_pid) if (s := sample_process(p, ports or {}))]
    attribute_to_servers(procs)
    return {
        "t": round(time.time() - t0, 2),
        "time": time.time(),
        "processes": procs,
        "run_dir_mb": run_dir_sizes(run_dir),
        "host": host_figures(run_dir.parent),
    }


class Sampler(threading.Thread):
    """Samples the tree under a root pid every `interval_s` into `out` (JSON lines)
    until `stop()`; `seen` keeps every process met (pid -> command line and start
    time, the later process when a pid was reused), so what the run started can be
    looked for after it ended. `root_pid` may be changed (a run resumed after a stop
    is a new root)."""

    def __init__(
        self,
        root_pid: int,
        run_dir: Path,
        out: Path,
        *,
        interval_s: float = 5.0,
        t0: float | None = None,
        on_sample: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        super().__init__(name="soak-sampler", daemon=True)
        self.root_pid, self.run_dir, self.out = root_pid, run_dir, out
        self.interval_s = interval_s
        self.t0 = time.time() if t0 is None else t0
        self.on_sample = on_sample
        self.seen: dict[int, tuple[str, float]] = {}
        self.samples = 0
        self._logs = ReplicaLogs(run_dir)
        self._stop_event = threading.Event()

    def sample_now(self) -> dict[str, Any]:
        """Take one sample, append it to `out` and return it."""
        sample = take_sample(self.root_pid, self.run_dir, self.t0, self._logs.scan())
        for proc in sample["processes"]:
            known = self.seen.get(proc["pid"])
            if known is None or proc["started"] > known[1]:
                self.seen[proc["pid"]] = (proc["cmd"], proc["started"])
        with self.out.open("a") as f:
            f.write(json.dumps(sample) + "\n")
        self.samples += 1
        if self.on_sample is not None:
            self.on_sample(sample)
        return sample

    def run(self) -> None:
        while not self._stop_event.is_set():
            started = time.monotonic()
            try:
                self.sample_now()
            except Exception:  # noqa: BLE001 - a failed sample must not end the soak
                log.exception("soak sample failed")
            self._stop_event.wait(max(0.0, self.interval_s - (time.monotonic() - started)))

    def stop(self, timeout_s: float = 30.0) -> None:
        self._stop_event.set()
        if self.is_alive():
            self.join(timeout_s)


def load_samples(path: Path) -> list[dict[str, Any]]:
    """The samples of a `samples.jsonl` (a line cut short by a kill is skipped)."""
    out = []
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out
