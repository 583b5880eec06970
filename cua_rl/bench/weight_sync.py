"""`cua-rl bench weight-sync` (cli/bench/weight_sync.py): bytes per second and bucket
count of the learner's weight broadcast, received by the vLLM side's code.

The sender is the learner's own code in this process (`weight_transfer.host_store`,
`open_link`, `send`: what `WeightSync` runs for each replica). The receiver is
`cua_rl_vllm.receive_tensors` in another process (bench/weight_sync_receiver.py),
run by vLLM's interpreter (the environment `./setup.sh --vllm` builds), or by this
one with that file on its path when there is none: `receiver.environment` says
which. Gloo over 127.0.0.1, host memory on both sides: the path a sync takes on
CPU, and on GPU too but for the copies between device and host
(docs/learner-ranks.md).

What is sent: `mb` MiB of Qwen3-VL-8B's tensors in bf16 (bench/weight_shapes.py),
filled with random bits. For each bucket size asked (0: one tensor per broadcast,
the protocol before buckets) the same weights go `repeats` times, each over a new
link as every sync opens one. Per sync: the receiver's wall time of
`receive_tensors` (`sync_s`: join, receive every bucket, split into tensors) and
the sender's time per bucket (packing and broadcast). The first sync of each size is
checked tensor by tensor: the SHA-256 of each tensor's bytes, on both sides.

`bytes_per_s` is the bytes over the median `sync_s`; `stream_bytes_per_s` leaves the
link's set-up out (the sender's time to open it, `link_s_median`). `model_8b` applies
each size to the whole model: its bucket count, and the seconds one replica's sync
would take (the set-up plus the model's bytes at the transfer rate).
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cua_rl.bench.weight_shapes import bench_manifest, entry_bytes, qwen3_vl_8b_manifest
from cua_rl.errors import ConfigError, InferenceUnavailable, WeightTransferError

MIB = 1 << 20
HOST = "127.0.0.1"
RECEIVER = Path(__file__).resolve().with_name("weight_sync_receiver.py")
READY_TIMEOUT_S = 120.0
"""Start-up of the receiver: importing torch in vLLM's environment takes seconds."""


def receiver_python() -> tuple[str, str]:
    """(interpreter, environment) of the receiver: vLLM's, else this one (said so)."""
    from cua_rl.inference.vllm_engine import resolve_vllm_python

    try:
        return resolve_vllm_python(), "vllm"
    except ConfigError as exc:
        return sys.executable, f"project interpreter ({exc})"


class _Receiver:
    """The receiver process; a thread reads its answers, so every wait has a deadline."""

    def __init__(self, python: str, log_path: Path) -> None:
        from cua_rl.inference.vllm_engine import SIDE_DIR

        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # not vLLM's pins
        self.log_path = log_path
        with log_path.open("w") as log:
            self.process = subprocess.Popen(
                [python, str(RECEIVER), str(SIDE_DIR)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                env=env,
            )
        self.gone = threading.Event()
        """Set when the receiver's output ended: a sender waiting for it stops."""
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, name="weight-sync-bench-receiver", daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)
        self.gone.set()
        self._lines.put(None)

    def tell(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(json.dumps(message) + "\n")
            self.process.stdin.flush()
        except OSError as exc:  # BrokenPipeError: it exited
            raise self.failure(f"could not be told a job ({exc})") from None

    def answer(self, timeout_s: float, what: str) -> dict[str, Any]:
        try:
            line = self._lines.get(timeout=timeout_s)
        except queue.Empty:
            raise self.failure(f"sent no {what} within {timeout_s:.0f} s") from None
        if line is None:
            raise self.failure(f"ended before its {what}")
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if not isinstance(message, dict):
            raise WeightTransferError(
                f"bench receiver: expected a JSON object as its {what}, got {line[:200]!r}"
            )
        return message

    def failure(self, what: str) -> InferenceUnavailable:
        if self.gone.is_set():  # its output ended: it is exiting, let its code be known
            try:
                self.process.wait(2)
            except subprocess.TimeoutExpired:
                pass
        code = self.process.poll()
        tail = " | ".join(self.log_path.read_text(errors="replace").strip().splitlines()[-3:])
        state = "running" if code is None else f"exit code {code}"
        return InferenceUnavailable(
            f"bench receiver ({state}) {what}; its log "
            f"{self.log_path} ends: {tail[-600:] or '(empty)'}"
        )

    def close(self) -> None:
        if self.process.stdin is not None and not self.process.stdin.closed:
            try:
                self.process.stdin.close()  # EOF: it exits
            except OSError:
                pass
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)


def _number(message: dict[str, Any], key: str, what: str) -> float:
    value = message.get(key)
    if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
        raise WeightTransferError(
            f"bench receiver: expected a non-negative number "
            f"`{key}` in its {what}, got {str(message)[:200]}"
        )
    return float(value)


def _random_weights(manifest: list[dict[str, Any]], seed: int) -> list[Any]:
    import torch

    bits = {2: torch.int16, 4: torch.int32}
    dtypes = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
    generator = torch.Generator().manual_seed(seed)
    out = []
    for entry in manifest:
        dtype = dtypes[entry["dtype"]]
        raw = bits[dtype.itemsize]
        info = torch.iinfo(raw)
        out.append(
            torch.randint(info.min, info.max, entry["shape"], dtype=raw, generator=generator).view(
                dtype
            )
        )
    return out


def _digests(tensors: list[Any]) -> list[str]:
    import torch

    return [
        hashlib.sha256(t.contiguous().reshape(-1).view(torch.uint8).numpy()).hexdigest()
        for t in tensors
    ]


def _one_sync(
    receiver: _Receiver, tensors: list[Any], bucket_bytes: int, check: bool, timeout_s: float
) -> tuple[dict[str, Any], float, list[float]]:
    """One link, one transfer: (the receiver's answer, the sender's seconds to open the
    link, its seconds per bucket)."""
    from cua_rl.inference import weight_transfer as wt

    link = [wt.host_store(HOST, 0, timeout_s)]  # the store lives only for this sync
    try:
        receiver.tell(
            {"host": HOST, "port": link[0].port, "bucket_bytes": bucket_bytes, "digests": check}
        )
        try:
            began = time.perf_counter()
            group = wt.open_link(
                HOST,
                link[0].port,
                rank=0,
                timeout_s=timeout_s,
                store=link[0],
                abandoned=receiver.gone,
            )
            opened = time.perf_counter() - began
            seconds = wt.send(group, tensors, bucket_bytes)
        except (wt.LinkAbandoned, TimeoutError, RuntimeError) as exc:
            raise receiver.failure(f"broke the link ({exc})") from None
        del group
        return receiver.answer(timeout_s, "sync result"), opened, seconds
    finally:
        link.clear()


def _summary(
    bucket_mb: int,
    layout_size: int,
    nbytes: int,
    sync_s: list[float],
    link_s: list[float],
    bucket_s: list[float],
) -> dict[str, Any]:
    median = statistics.median(sync_s)
    # the transfer alone: the receiver's time less the link's set-up (as the sender saw it)
    stream = statistics.median(max(s - k, 1e-6) for s, k in zip(sync_s, link_s, strict=True))
    return {
        "bucket_mb": bucket_mb,
        "buckets": layout_size,
        "bytes_per_s": round(nbytes / median),
        "gb_per_s": round(nbytes / median / 1e9, 3),
        "sync_s_median": round(median, 4),
        "sync_s": [round(s, 4) for s in sync_s],
        "link_s_median": round(statistics.median(link_s), 4),
        "stream_bytes_per_s": round(nbytes / stream),
        "per_bucket_ms_median": round(1000 * statistics.median(bucket_s), 3),
        "per_bucket_ms_max": round(1000 * max(bucket_s), 3),
        "verified": True,
    }


def model_8b_estimate(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The whole Qwen3-VL-8B in bf16 at each measured size: its buckets, and the seconds
    one replica's sync would take: the link's set-up plus its bytes at the measured
    transfer rate (`stream_bytes_per_s`), so the estimate does not depend on `mb`."""
    from cua_rl.inference import weight_transfer as wt

    manifest = qwen3_vl_8b_manifest()
    nbytes = sum(map(entry_bytes, manifest))
    return {
        "model": "Qwen3-VL-8B",
        "dtype": "bfloat16",
        "tensors": len(manifest),
        "bytes": nbytes,
        "by_bucket_mb": {
            str(r["bucket_mb"]): {
                "buckets": len(wt.bucket_layout(manifest, r["bucket_mb"] * MIB)),
                "seconds_per_replica": round(
                    r["link_s_median"] + nbytes / r["stream_bytes_per_s"], 2
                ),
            }
            for r in results
        },
    }


def _checked_sync(
    receiver: _Receiver,
    tensors: list[Any],
    manifest: list[dict[str, Any]],
    expected: list[str] | None,
    bucket_mb: int,
    timeout_s: float,
) -> tuple[float, float, list[float]]:
    """One sync whose answer is validated (count, bytes, and digests when `expected`):
    (the receiver's seconds, the sender's seconds to open the link, per bucket)."""
    answer, opened, seconds = _one_sync(
        receiver, tensors, bucket_mb * MIB, expected is not None, timeout_s
    )
    what = "sync result"
    nbytes = sum(map(entry_bytes, manifest))
    got = (_number(answer, "tensors", what), _number(answer, "bytes", what))
    if got != (len(manifest), nbytes):
        raise WeightTransferError(
            f"bench receiver got {got[0]:.0f} tensors, {got[1]:.0f} "
            f"bytes; sent {len(manifest)}, {nbytes}"
        )
    if expected is not None and answer.get("digests") != expected:
        raise WeightTransferError(
            f"bucket {bucket_mb} MiB: the received tensors' SHA-256 differ from the sent ones"
        )
    return _number(answer, "seconds", what), opened, seconds


def run_bench(
    mb: int,
    bucket_mb: list[int],
    repeats: int = 3,
    timeout_s: float = 300.0,
    log: Callable[[str], None] = lambda _line: None,
    python: str | None = None,
) -> dict[str, Any]:
    """Measure every bucket size (see module doc): one untimed warm-up sync, then
    `repeats` rounds, each going through every size in turn (so a change of the
    machine's load meets every size alike). `python` overrides the receiver's
    interpreter (tests)."""
    from cua_rl.inference import weight_transfer as wt
    from cua_rl.learner.config import WeightSyncConfig

    if mb < 1 or repeats < 1 or not bucket_mb or min(bucket_mb) < 0:
        raise ConfigError(
            f"bench weight-sync: expected mb >= 1, repeats >= 1 and bucket sizes "
            f">= 0; got mb={mb}, repeats={repeats}, bucket_mb={bucket_mb}"
        )
    environment = "given"
    if python is None:
        python, environment = receiver_python()
    load_before = os.getloadavg()
    manifest = bench_manifest(mb * MIB)
    nbytes = sum(map(entry_bytes, manifest))
    log(
        f"weight-sync: {len(manifest)} tensors, {nbytes / MIB:.0f} MiB of Qwen3-VL-8B's "
        f"(bf16); receiver: {python} ({environment})"
    )
    tensors = _random_weights(manifest, seed=45)
    expected = _digests(tensors)
    timed: dict[int, tuple[list[float], list[float], list[float]]] = {
        size: ([], [], []) for size in bucket_mb
    }
    with tempfile.TemporaryDirectory(prefix="cua-rl-bench-weight-sync-") as tmp:
        receiver = _Receiver(python, Path(tmp) / "receiver.log")
        try:
            ready = receiver.answer(READY_TIMEOUT_S, "ready line")
            receiver.tell({"manifest": manifest, "timeout_s": timeout_s})
            warm = _checked_sync(receiver, tensors, manifest, None, bucket_mb[0], timeout_s)[0]
            log(f"warm-up sync (not counted): {warm:.3f} s")
            for r in range(repeats):
                for size in bucket_mb:
                    sync_s, link_s, bucket_s = timed[size]
                    seconds, opened, per_bucket = _checked_sync(
                        receiver, tensors, manifest, expected if r == 0 else None, size, timeout_s
                    )
                    sync_s.append(seconds)
                    link_s.append(opened)
                    bucket_s += per_bucket
                    log(
                        f"round {r + 1}/{repeats}, bucket {size:>4} MiB: {len(per_bucket)} "
                        f"broadcasts, {seconds:.3f} s, {nbytes / seconds / 1e9:.2f} GB/s"
                    )
        finally:
            receiver.close()
    results = [
        _summary(size, len(wt.bucket_layout(manifest, size * MIB)), nbytes, *timed[size])
        for size in bucket_mb
    ]
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "receiver": {
            "python": python,
            "environment": environment,
            "torch": ready.get("torch"),
            "vllm": ready.get("vllm"),
        },
        "link": f"gloo over {HOST}",
        "dtype": "bfloat16",
        "mb": mb,
        "bytes": nbytes,
        "tensors": len(manifest),
        "repeats": repeats,
        "warm_up_s": round(warm, 4),
        "default_bucket_mb": WeightSyncConfig().bucket_mb,
        "cpus": os.cpu_count(),
        "load_avg_before": [round(x, 2) for x in load_before],
        "load_avg_after": [round(x, 2) for x in os.getloadavg()],
        "results": results,
        "model_8b": model_8b_estimate(results),
    }
