"""Replica logs keep to their size cap (`inference/replica_log.py`) while a real child
process writes into them, and the port readers (`ReplicaLogs`: the soak and the fault
benches) still find the latest server start."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from cua_rl.inference import replica_process
from cua_rl.inference.replica_log import rotate_replica_log
from cua_rl.inference.replica_process import ServerProcess
from cua_rl.runtime.telemetry.replica_logs import ReplicaLogs

START = "hf engine serving tiny on 127.0.0.1:{port}"
CHATTY = (  # a server that starts, then logs a weight update every few ms
    "import sys, time\n"
    "print(sys.argv[1], flush=True)\n"
    "for i in range(100000):\n"
    "    print(f'weight update {i} from 127.0.0.1:9999 ' + 'x' * 200, flush=True)\n"
    "    time.sleep(0.002)\n"
)


def test_copy_truncate_keeps_the_latest_start_line(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "policy-0.log"
    log.parent.mkdir()
    log.write_text(
        f"{START.format(port=1111)}\nnoise\n{START.format(port=2222)}\n"
        + "update from 127.0.0.1:9999\n" * 400
    )
    reader = ReplicaLogs(tmp_path)
    assert reader.scan() == {2222: "policy-0"}
    assert not rotate_replica_log(log, 1_000_000)  # under the cap: untouched
    assert rotate_replica_log(log, 1000)
    backup = tmp_path / "logs" / "policy-0.log.1"
    assert log.stat().st_size < 300 and backup.stat().st_size > 10_000
    with log.open("ab") as out:  # the server writes on (O_APPEND)
        out.write(b"update from 127.0.0.1:9999\n")
    assert reader.scan() == {2222: "policy-0"}  # the incremental reader
    assert ReplicaLogs(tmp_path).scan() == {2222: "policy-0"}  # a fresh one
    log.write_bytes(log.read_bytes() + b"more\n" * 300)
    assert rotate_replica_log(log, 1000)  # again: the note does not nest
    first = log.read_bytes().split(b"\n")[0]
    assert first.count(b"latest start") == 1 and first.endswith(START.format(port=2222).encode())


async def test_a_running_servers_log_rotates_and_still_names_its_port(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(replica_process, "ROTATE_EVERY_S", 0.05)
    log = tmp_path / "logs" / "prm-0.log"
    log.parent.mkdir()
    server = ServerProcess(
        [sys.executable, "-c", CHATTY, START.format(port=3333)],
        {},
        "http://127.0.0.1:3333",
        log,
        ready_timeout_s=5,
        log_max_bytes=40_000,
    )
    reader = ReplicaLogs(tmp_path)
    await server.spawn()
    try:
        for _ in range(200):
            await asyncio.sleep(0.05)
            assert reader.scan("prm") in ({}, {3333: "prm-0"})
            if (tmp_path / "logs" / "prm-0.log.1").exists() and log.stat().st_size > 1000:
                break
        assert server.alive()
    finally:
        await server.close()
    data = log.read_bytes()
    assert b"\0" not in data  # O_APPEND: no hole where the cut was
    # The note is the first line unless the server wrote between the truncate and the
    # note (a clean-clone run saw that once); the reader finds it in any line.
    notes = [line for line in data.split(b"\n")[:5] if line.startswith(b"[cua-rl ")]
    assert notes and START.format(port=3333).encode() in notes[-1], data[:400]
    assert log.stat().st_size < 40_000 + 20_000
    assert reader.scan("prm") == {3333: "prm-0"} and ReplicaLogs(tmp_path).scan() == {3333: "prm-0"}
