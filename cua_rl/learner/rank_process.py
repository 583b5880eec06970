"""A learner's ranks as child processes of the run (`runtime: local`), torchrun-style.

The driver starts one process per rank with torchrun's environment (RANK,
WORLD_SIZE, LOCAL_RANK, MASTER_ADDR=127.0.0.1, MASTER_PORT) and talks to each
over its own socket pair (inherited descriptor, so no listening port and no
credential). A call goes to every rank at once and waits for every answer,
bounded by a deadline; a rank that exits fails the call at once (its socket
closes), and the group is then stopped, since the others may wait in a collective.

Invariants: the ranks die with the run, even when it is SIGKILLed: each watches
the driver's pid through a pidfd (`owner_watch`) and exits when it is gone; each
runs in its own session, so a Ctrl-C reaches the driver only, which stops the
ranks in order; `close` leaves no rank process behind (stop, then SIGTERM, then
SIGKILL to each rank's process group). Run as `python -m cua_rl.learner.rank_process`
it is the rank's side: a loop that runs `RankWorker` methods.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from cua_rl.errors import LearnerRankError
from cua_rl.inference.gpus import VISIBLE_ENV
from cua_rl.inference.owner_watch import owner_env, owner_pid
from cua_rl.learner.config import LearnerConfig
from cua_rl.process_launch import ProcessLaunch, record_launch

FD_ENV = "CUA_RL_RANK_FD"
"""The inherited socket descriptor a rank process talks to the driver on."""
STOP_GRACE_S = 10.0
POLL_S = 1.0
CALL_GRACE_S = 1.0
"""What `close` waits for a call in flight: its result is of no use to a stopping run."""


@dataclass
class _Rank:
    proc: subprocess.Popen[bytes]
    conn: Connection
    log: Path


class ProcessRanks:
    """`cfg.ranks` rank processes on this machine, one `RankWorker` each."""

    def __init__(
        self,
        cfg: LearnerConfig,
        model_dir: str,
        *,
        name: str,
        log_dir: Path,
        devices: Sequence[tuple[str, ...]] | None = None,
    ) -> None:
        """`devices[r]`: rank r's CUDA_VISIBLE_DEVICES (runtime/devices.py: one GPU each,
        which is then its device 0); None: every rank sees this process's devices and
        takes GPU `LOCAL_RANK` = r (torchrun's way)."""
        self.cfg = cfg
        self.model_dir = model_dir
        self.name = name
        self.log_dir = log_dir
        self.devices = list(devices) if devices is not None else None
        self.world_size = cfg.ranks
        self._ranks: list[_Rank] = []
        self._lock = threading.Lock()
        self._failed: str | None = None

    def start(self) -> None:
        """Start the processes and join them into one DeepSpeed group."""
        from cua_rl.net_ports import reserve_port

        self.log_dir.mkdir(parents=True, exist_ok=True)
        # Held until the group formed: rank 0's store binds it beside the reservation.
        with reserve_port("127.0.0.1") as port:
            for rank in range(self.world_size):
                self._ranks.append(self._spawn(rank))
            n = self.world_size
            local = [0 if self.devices is not None else r for r in range(n)]
            self.call(
                [("init", (self.cfg, self.model_dir, r, n, local[r])) for r in range(n)],
                self.cfg.rank_timeout_s,
                "start",
            )
            self.call([("start", ("127.0.0.1", port.port))] * n, self.cfg.rank_timeout_s, "start")

    def _spawn(self, rank: int) -> _Rank:
        ours, theirs = socket.socketpair()
        log_path = self.log_dir / f"{self.name}-rank{rank}.log"
        launch = rank_launch(
            self.cfg,
            self.name,
            rank,
            theirs.fileno(),
            self.devices[rank] if self.devices is not None else None,
        )
        record_launch(launch)
        try:
            with open(log_path, "ab") as log:
                proc = subprocess.Popen(
                    list(launch.argv),
                    env={**os.environ, **launch.env},
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    pass_fds=(theirs.fileno(),),
                    start_new_session=True,
                )
        finally:
            theirs.close()
        return _Rank(proc, Connection(ours.detach()), log_path)

    def call(
        self, calls: Sequence[tuple[str, tuple[Any, ...]]], timeout_s: float, what: str
    ) -> list[Any]:
        """Send `calls[r]` to rank r, all at once; every rank's result, in rank order."""
        with self._lock:
            if self._failed is not None:
                raise LearnerRankError(f"{self.name} ranks stopped after: {self._failed}")
            try:
                for i, (rank, message) in enumerate(zip(self._ranks, calls, strict=True)):
                    try:
                        _send(rank.conn, message)
                    except OSError as exc:
                        raise LearnerRankError(self._lost(i, what, exc)) from exc
                return self._answers(timeout_s, what)
            except (OSError, LearnerRankError) as exc:
                self._failed = str(exc)
                self._kill()
                if isinstance(exc, LearnerRankError):
                    raise
                raise LearnerRankError(f"{self.name} {what}: a rank went away ({exc})") from exc

    def _answers(self, timeout_s: float, what: str) -> list[Any]:
        results: list[Any] = [None] * len(self._ranks)
        pending = set(range(len(self._ranks)))
        deadline = time.monotonic() + timeout_s
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                raise LearnerRankError(
                    f"{self.name} {what}: rank(s) {sorted(pending)} did not "
                    f"answer within {timeout_s:.0f} s (learner.rank_timeout_s)"
                )
            by_conn = {self._ranks[i].conn: i for i in pending}
            for conn in wait(list(by_conn), timeout=min(left, POLL_S)):
                i = by_conn[conn]  # type: ignore[index]  # wait() returns the connections it was given
                try:
                    status, value = _recv(conn)  # type: ignore[arg-type]  # wait() returns the connections it was given
                except (EOFError, OSError) as exc:
                    raise LearnerRankError(self._lost(i, what, exc)) from None
                if status != "ok":
                    raise LearnerRankError(
                        f"{self.name} rank {i} {what}: {value} (log: {self._ranks[i].log})"
                    )
                results[i] = value
                pending.discard(i)
            for i in sorted(pending):
                if self._ranks[i].proc.poll() is not None:
                    raise LearnerRankError(self._died(i, what))
        return results

    def _lost(self, i: int, what: str, exc: BaseException) -> str:
        """Rank i's connection closed or reset: it died (say how) or hung up."""
        rank = self._ranks[i]
        with contextlib.suppress(subprocess.TimeoutExpired):
            rank.proc.wait(POLL_S)  # a dead rank's socket closes as it exits
        if rank.proc.returncode is not None:
            return self._died(i, what)
        return f"{self.name} rank {i} {what}: its connection failed ({exc!r}; log: {rank.log})"

    def _died(self, i: int, what: str) -> str:
        rank = self._ranks[i]
        with contextlib.suppress(subprocess.TimeoutExpired):
            rank.proc.wait(STOP_GRACE_S)
        return (
            f"{self.name} rank {i} exited (code {rank.proc.returncode}) during {what} "
            f"(log: {rank.log})"
        )

    def pids(self) -> list[int]:
        return [r.proc.pid for r in self._ranks]

    def close(self) -> None:
        """Stop every rank (asked first, then signalled); idempotent. A call still in
        flight (a run stopped mid-update) gets CALL_GRACE_S to end, then its ranks are
        killed under it (it fails with LearnerRankError)."""
        if not self._lock.acquire(timeout=CALL_GRACE_S):
            self._failed = self._failed or "closed during a call"
            self._kill()
            return
        try:
            if self._failed is None and self._ranks:
                with contextlib.suppress(OSError, LearnerRankError):
                    for rank in self._ranks:
                        _send(rank.conn, ("stop", ()))
                    self._answers(STOP_GRACE_S * 3, "stop")
            self._failed = self._failed or "closed"
            self._kill()
        finally:
            self._lock.release()

    def _kill(self) -> None:
        """SIGTERM, then SIGKILL, each rank's process group (its own session)."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for rank in self._ranks:
                if rank.proc.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(rank.proc.pid, sig)
            for rank in self._ranks:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    rank.proc.wait(STOP_GRACE_S if sig == signal.SIGTERM else None)
        for rank in self._ranks:
            rank.conn.close()


def rank_launch(
    cfg: LearnerConfig, name: str, rank: int, fd: int, devices: tuple[str, ...] | None
) -> ProcessLaunch:
    """How rank `rank` of the learner `name` starts (the launch and `cua-rl train
    --dry-run` alike): the descriptor it talks on, its threads and, on GPU, its device."""
    env = {
        **owner_env(),
        FD_ENV: str(fd),
        "OMP_NUM_THREADS": str(max(1, int(cfg.rank_cpus))),
        "TOKENIZERS_PARALLELISM": "false",
    }
    if cfg.engine.type == "deepspeed" and cfg.engine.dist_backend == "gloo":
        env["DS_ACCELERATOR"] = "cpu"
    if devices is not None:
        env[VISIBLE_ENV] = ",".join(devices)
    return ProcessLaunch(
        f"{name} learner rank {rank}",
        (sys.executable, "-m", "cua_rl.learner.rank_process"),
        env,
        tuple(devices or ()),
    )


def _send(conn: Connection, obj: Any) -> None:
    """Plain pickle, by value: `Connection.send` would share tensors through
    torch's shared-memory reductions, which need a multiprocessing-spawned peer."""
    conn.send_bytes(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


def _recv(conn: Connection) -> Any:
    return pickle.loads(conn.recv_bytes())


def _watch_owner() -> None:
    """Exit this rank (at once, no cleanup to wait for) when the run's process is gone."""
    import asyncio

    from cua_rl.inference.owner_watch import exit_when_owner_dies

    pid = owner_pid()
    if pid is None:
        return
    threading.Thread(
        target=lambda: asyncio.run(exit_when_owner_dies(pid, lambda: os._exit(70))),
        name="owner-watch",
        daemon=True,
    ).start()


def main() -> None:
    """The rank's loop: (method, args) in, ("ok", result) or ("error", line) out."""
    _watch_owner()
    conn = Connection(int(os.environ[FD_ENV]))
    from cua_rl.learner.rank_worker import RankWorker

    worker: RankWorker | None = None
    while True:
        try:
            method, args = _recv(conn)
        except EOFError:  # the driver closed its end: nothing more to do
            return
        try:
            if method == "init":
                worker = RankWorker(*args)
                result: Any = None
            else:
                result = getattr(worker, method)(*args)
            _send(conn, ("ok", result))
        except Exception as exc:  # noqa: BLE001 - reported to the driver, which stops the run
            traceback.print_exc()
            _send(conn, ("error", f"{type(exc).__name__}: {exc}"))
        if method == "stop":
            return


if __name__ == "__main__":
    main()
