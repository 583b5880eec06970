"""Real vLLM replicas for tests, started the way a run starts them.

A test session shares one replica (vLLM's CPU build needs about a minute to start).
It runs under an owner process (vllm_owner.py) that calls `replica_set`, so the
launcher's readiness poll, log files and death signal are exercised too.
"""

from __future__ import annotations

import json
import os
import secrets
import select
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cua_rl.errors import ConfigError
from cua_rl.inference.owner_watch import OWNER_ENV
from cua_rl.inference.server_auth import TOKEN_ENV
from cua_rl.inference.vllm_engine import resolve_vllm_python


def vllm_unavailable() -> str | None:
    """Why vLLM tests cannot run here (None when they can)."""
    try:
        resolve_vllm_python()
    except ConfigError as exc:
        return str(exc)
    return None


def owned_pids(owner: int) -> list[int]:
    """Processes whose environment names `owner` as their owner (replicas and children)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"{OWNER_ENV}={owner}".encode() in environ:
            found.append(int(entry.name))
    return found


@dataclass
class VllmReplica:
    owner: subprocess.Popen
    url: str
    log_dir: Path
    token: str
    """The credential its `/update_weights` requires."""

    def pids(self) -> list[int]:
        return owned_pids(self.owner.pid)

    def kill_owner(self, deadline_s: float = 60.0) -> list[int]:
        """SIGKILL the owner; the pids of its replicas still alive after the deadline."""
        self.owner.kill()
        self.owner.wait(10)
        end = time.monotonic() + deadline_s
        while (left := self.pids()) and time.monotonic() < end:
            time.sleep(0.2)  # poll interval
        for pid in left:  # never leak a server, whatever the result
            os.kill(pid, signal.SIGKILL)
        return left


def start_vllm_replica(
    model_dir: Path, log_dir: Path, deadline_s: float = 400.0, **pool: Any
) -> VllmReplica:
    """Start an owner that launches one vLLM replica; return once it is ready."""
    cfg = {
        "engine": "vllm",
        "model": str(model_dir),
        "replicas": 1,
        "ready_timeout_s": deadline_s,
        **pool,
    }
    token = secrets.token_urlsafe(16)
    owner = subprocess.Popen(
        [
            sys.executable,
            str(Path(__file__).with_name("vllm_owner.py")),
            json.dumps(cfg),
            str(log_dir),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=open(log_dir / "owner.log", "wb"),
        env={**os.environ, TOKEN_ENV: token},
    )  # noqa: SIM115 - the log lives with the process
    assert owner.stdout is not None
    try:
        ready, _, _ = select.select([owner.stdout], [], [], deadline_s + 30)
        line = owner.stdout.readline() if ready else b""
        if not line:
            owner.kill()
            owner.wait(10)
            raise RuntimeError(f"vLLM owner gave no URL: {(log_dir / 'owner.log').read_text()}")
    except BaseException:
        owner.kill()
        raise
    return VllmReplica(owner, json.loads(line)[0], log_dir, token)


def chat(url: str, body: dict[str, Any], timeout_s: float = 120.0) -> tuple[dict[str, Any], int]:
    """One chat completion (token ids on); the body and the served version."""
    request = urllib.request.Request(
        url + "/v1/chat/completions",
        json.dumps({"logprobs": True, "return_token_ids": True, **body}).encode(),
        {"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        return json.loads(response.read()), int(response.headers["x-model-version"])
