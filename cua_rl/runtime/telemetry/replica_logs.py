"""Which port each model-server replica of a run listens on, from its log.

A run's replica sets write one log per replica, `logs/<pool>-<i>.log`, and a
server names its address there when it starts: hf's `hf engine serving MODEL on
127.0.0.1:P`, vLLM's `Starting vLLM server on http://127.0.0.1:P`. A replica
restarted by supervision keeps its port; a run resumed after a stop appends to the
same log with a new port, so the latest start line is the one that counts. Other
lines name other ports (a weight update names its transport's): only start lines
are read. Logs grow (hf logs every weight update), so a reader scans each log once
and then only what was appended since (`ReplicaLogs.scan`). A log rotated at its size
cap (`inference/replica_log.py`) is shorter than what was read: it is read again from
its start, whose first line repeats the latest start line.
"""

from __future__ import annotations

from pathlib import Path

from cua_rl.inference.replica_log import SERVER_START


class ReplicaLogs:
    """The latest port of each replica log of a run directory, read incrementally."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self._offsets: dict[Path, int] = {}
        self._ports: dict[str, int] = {}

    def scan(self, role: str = "*") -> dict[int, str]:
        """port -> `<pool>-<i>` of the `role` replicas (every pool's with "*")."""
        logs = sorted((self.run_dir / "logs").glob(f"{role}-*.log"))
        for log in logs:
            offset = self._offsets.get(log, 0)
            try:
                if log.stat().st_size < offset:  # a new log in its place: read it all
                    offset = 0
                with log.open("rb") as f:
                    f.seek(offset)
                    data = f.read()
            except OSError:
                continue
            whole = data.rfind(b"\n") + 1  # a line being written is read next time
            found = SERVER_START.findall(data[:whole])
            if found:
                self._ports[log.stem] = int(found[-1])
            self._offsets[log] = offset + whole
        stems = {log.stem for log in logs}
        return {port: stem for stem, port in self._ports.items() if stem in stems}
