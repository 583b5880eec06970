"""The forwarder process of a container desktop, as the provider handles it from the
host: start it (`start_forwarder`, recording its pid and start time in the state
dir's forward.json), tell whether it still runs (`forwarder_alive`) and stop it
(`stop_forwarder`).

It is apart from container/provider.py, which runs the containers: the forwarder
outlives the process that started it (it is its own session leader), so any later
process finds it through forward.json, and a pid is trusted only with the start time
recorded beside it. What the forwarder itself does is container/forward.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from cua_rl.desktop.providers.local.session import process_start_time


def start_forwarder(
    ddir: Path,
    name: str,
    port: int,
    cdp_port: int,
    engine: str,
    owner_pid: int | None,
    forwarders: dict[str, subprocess.Popen],
) -> None:
    """Start the forwarder of the desktop whose state dir is `ddir` (container `name`),
    serving its guest on 127.0.0.1:`port` and DevTools on `cdp_port`; the process is
    kept in `forwarders` under the desktop's id."""
    argv = [
        sys.executable,
        "-m",
        "cua_rl.desktop.providers.container.forward",
        "--port",
        str(port),
        "--socket",
        str(ddir / "run" / "guest.sock"),
        "--cdp-port",
        str(cdp_port),
        "--cdp-socket",
        str(ddir / "run" / "cdp.sock"),
        "--container",
        name,
        "--engine",
        engine,
    ]
    if owner_pid is not None:
        argv += ["--owner-pid", str(owner_pid)]
    with open(ddir / "forward.log", "ab") as log:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd="/",
        )
    forwarders[ddir.name] = proc
    (ddir / "forward.json").write_text(
        json.dumps({"pid": proc.pid, "start_time": process_start_time(proc.pid), "port": port})
    )


def forwarder_alive(ddir: Path) -> bool:
    rec = _record(ddir / "forward.json")
    return bool(rec) and process_start_time(rec["pid"]) == rec["start_time"]


def stop_forwarder(ddir: Path, forwarders: dict[str, subprocess.Popen]) -> None:
    """Stop the desktop's forwarder (the recorded one, if it still runs, and the one in
    `forwarders`, which it takes out of there); SIGKILL after 5 s."""
    rec = _record(ddir / "forward.json")
    proc = forwarders.pop(ddir.name, None)
    if rec and process_start_time(rec["pid"]) == rec["start_time"]:
        try:
            os.kill(rec["pid"], signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline and process_start_time(rec["pid"]) is not None:
            if proc is not None and proc.poll() is not None:
                break
            time.sleep(0.02)
        else:
            if process_start_time(rec["pid"]) is not None:
                os.kill(rec["pid"], signal.SIGKILL)
    if proc is not None:
        try:
            proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            proc.kill()


def _record(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and {"pid", "start_time"} <= data.keys() else None
