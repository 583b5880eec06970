"""Start and stop the model-server replicas a run needs.

`hf` replicas are `cua-rl serve --engine hf` child processes on free ports; `vllm`
replicas are vLLM's server in its own interpreter (vllm_engine.py), reached through
`python -m cua_rl.inference.vllm_engine`, which arms the owner's death signal and
execs it. Each replica runs in its own process group so that stopping a run never
leaves one (or a vLLM engine-core child) behind, logs to `<log_dir>/<name>-<i>.log`,
and is polled on /health with a deadline. `replica_set` hands the processes to a
supervised `ReplicaSet` (replica_set.py) that restarts them; every replica requires the
pool's per-run credential on `/update_weights`, passed in its environment. Servers
given as `urls` are used as they are (e.g. a vLLM deployment managed elsewhere).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import logging
import os
import re
import secrets
import sys
import time
from collections.abc import AsyncIterator, Coroutine, Sequence
from pathlib import Path
from typing import Any

from cua_rl.errors import ConfigError
from cua_rl.inference.client import InferenceClient
from cua_rl.inference.config import TINY, ModelServersConfig
from cua_rl.inference.gpus import VISIBLE_ENV
from cua_rl.inference.owner_watch import owner_env
from cua_rl.inference.replica_process import ServerProcess, start_server
from cua_rl.inference.replica_set import Replica, ReplicaHandle, ReplicaSet
from cua_rl.inference.server_auth import TOKEN_ENV
from cua_rl.inference.vllm_engine import VllmEngineConfig, detect_device, resolve_vllm_python
from cua_rl.process_launch import ProcessLaunch

logger = logging.getLogger(__name__)
"""(`log` names the replicas' log files below.)"""


TINY_BUILD = "tiny-qwen3-vl-primed-v3"
"""Cache name of the built tiny model; bumped when the build changes (v2: 1000 priming
steps; v3: primed on the method's prompt structure, one tool call per step) so that a
cache from an older build is not reused."""


def default_tiny_dir() -> Path:
    default = Path.home() / ".cache" / "cua-rl" / TINY_BUILD
    return Path(os.environ.get("CUA_RL_TINY_MODEL", default))


async def ensure_tiny_model(path: Path, *, lock_timeout_s: float = 1800.0) -> Path:
    """Build the tiny checkpoint once (seed 0); later runs reuse it.

    A lock file beside it makes concurrent callers (two runs, two pools) wait for one
    build instead of building twice; the build itself is written atomically. The
    build takes minutes, so it says so on stderr when it starts and ends.
    """
    if (path / "config.json").is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 - once, before a build
    with open(path.parent / f".{path.name}.lock", "w") as lock:  # noqa: ASYNC230
        deadline = time.monotonic() + lock_timeout_s
        while True:  # non-blocking tries, so cancellation is never stuck in a thread
            try:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise ConfigError(
                        f"{path}: another process has been building the tiny "
                        f"model for {lock_timeout_s:.0f} s; remove "
                        f"{lock.name} if no build is running"
                    ) from None
                await asyncio.sleep(1.0)
        if (path / "config.json").is_file():  # built by whoever held the lock
            return path
        logger.info("building the tiny model in %s (once; about 4 minutes on 2 cores)", path)
        started = time.monotonic()
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "cua_rl.cli",
            "tiny-model",
            str(path),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        tail = await _relay_build_output(proc)
        if await proc.wait() != 0:
            raise ConfigError(f"building the tiny model in {path} failed:\n{tail[-2000:]}")
        logger.info("tiny model built in %.0f s", time.monotonic() - started)
    return path


_CHILD_LOG_PREFIX = re.compile(r"^\d\d:\d\d:\d\d INFO [\w.]+: ")
"""The build's own stderr format for INFO records (run_logging.py): dropped when relayed,
since our logger adds its own time and name."""


async def _relay_build_output(proc: asyncio.subprocess.Process, keep: int = 40) -> str:
    """Log the build's lines as they come (its priming progress) and return the last
    `keep` of them for an error message."""
    assert proc.stdout is not None
    lines: list[str] = []
    async for raw in proc.stdout:
        line = _CHILD_LOG_PREFIX.sub("", raw.decode(errors="replace").rstrip())
        if line:
            logger.info("tiny model: %s", line)
            lines = [*lines[-keep + 1 :], line]
    return "\n".join(lines)


def resolve_model(cfg: ModelServersConfig, tiny_dir: Path) -> str:
    if cfg.model == TINY:
        return str(tiny_dir)
    if cfg.engine == "hf" and not Path(cfg.model).expanduser().is_dir():
        raise ConfigError(
            f"model {cfg.model!r}: the hf engine needs a checkpoint directory that exists "
            "(no downloads at run time); use `tiny` or a local path"
        )
    return str(Path(cfg.model).expanduser()) if cfg.engine == "hf" else cfg.model


@contextlib.asynccontextmanager
async def model_servers(
    cfg: ModelServersConfig,
    *,
    name: str,
    log_dir: Path,
    tiny_dir: Path | None = None,
    version: int = 0,
) -> AsyncIterator[list[str]]:
    """Yield the base URLs of a ready pool; stop what was started on exit. The replicas
    are supervised (restarted when they die) while the context is open."""
    async with replica_set(
        cfg, name=name, log_dir=log_dir, tiny_dir=tiny_dir, version=version
    ) as replicas:
        yield replicas.urls


@contextlib.asynccontextmanager
async def replica_set(
    cfg: ModelServersConfig,
    *,
    name: str,
    log_dir: Path,
    tiny_dir: Path | None = None,
    version: int = 0,
    token: str | None = None,
    devices: Sequence[tuple[str, ...]] | None = None,
) -> AsyncIterator[ReplicaSet]:
    """A ready, supervised set of the pool's replicas; every process started is stopped
    on exit. The servers require `token` (a fresh one when None) on `/update_weights`;
    the set's clients send it. Servers given as `cfg.urls` are probed, never restarted.
    `devices[i]`: replica i's CUDA_VISIBLE_DEVICES (runtime/devices.py; empty: no GPU);
    None: the replicas inherit this process's."""
    req = cfg.requests
    if cfg.urls:
        replicas = ReplicaSet.from_urls(
            cfg.urls,
            timeout_s=req.request_timeout_s,
            connect_timeout_s=req.connect_timeout_s,
            token=token or os.environ.get(TOKEN_ENV),
            name=name,
            config=cfg.supervision,
            probe_interval_s=req.probe_interval_s,
            version=version,
        )
        try:
            yield replicas
        finally:
            await replicas.close()
        return
    python = resolve_vllm_python(cfg.python) if cfg.engine == "vllm" else None
    tiny = tiny_dir or default_tiny_dir()
    if cfg.model == TINY:
        await ensure_tiny_model(tiny)
    model = resolve_model(cfg, tiny)
    log_dir.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 - once, at start-up
    token = token or secrets.token_urlsafe(32)

    def launch(i: int, port: int) -> ProcessLaunch:
        return replica_launch(
            cfg,
            name=name,
            index=i,
            model=model,
            port=port,
            version=version,
            token=token,
            python=python,
            devices=devices[i] if devices is not None else None,
        )

    started: dict[int, ServerProcess] = {}

    async def start(i: int) -> None:
        started[i] = await start_server(
            functools.partial(launch, i),
            log_path=log_dir / f"{name}-{i}.log",
            ready_timeout_s=cfg.ready_timeout_s,
            what=f"start of {name} replica {i}",
            log_max_bytes=cfg.log_max_mb * 1024 * 1024,
        )

    try:
        await gather_or_cancel([start(i) for i in range(cfg.replicas)])
        # URLs are known only now: a replica whose port was taken moved before anyone
        # saw its URL.
        handles = [started[i] for i in range(cfg.replicas)]
        async with supervised(
            cfg, [(h.url, h) for h in handles], name=name, token=token, version=version
        ) as replicas:
            yield replicas
    finally:
        await asyncio.gather(*(h.close() for h in started.values()))


@contextlib.asynccontextmanager
async def supervised(
    cfg: ModelServersConfig,
    handles: Sequence[tuple[str, ReplicaHandle]],
    *,
    name: str,
    token: str,
    version: int,
) -> AsyncIterator[ReplicaSet]:
    """A monitored `ReplicaSet` over replicas this run started, `(url, handle)` each, at
    `version`: it restarts them (local processes or replica actors alike), its clients
    carry the pool's deadlines and credential. Supervision ends on exit, before the
    caller stops the processes, so nothing restarts what is being stopped."""
    req = cfg.requests
    replicas = ReplicaSet(
        [
            Replica(
                url,
                InferenceClient(
                    url, req.request_timeout_s, connect_timeout_s=req.connect_timeout_s, token=token
                ),
                handle=handle,
                version=version,
            )
            for url, handle in handles
        ],
        name=name,
        config=cfg.supervision,
        probe_interval_s=req.probe_interval_s,
        version=version,
    )
    try:
        replicas.start_monitor()
        yield replicas
    finally:
        await replicas.close()


async def gather_or_cancel(starts: list[Coroutine[Any, Any, None]]) -> None:
    """Run `starts` concurrently; on the first error cancel the rest, wait for them to
    clean up, and raise that error (as `gather` would, without leaving any running)."""
    tasks = [asyncio.ensure_future(s) for s in starts]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def vllm_argv(
    cfg: ModelServersConfig,
    model: str,
    python: str,
    port: int,
    version: int,
    host: str = "127.0.0.1",
    device: str | None = None,
) -> list[str]:
    """The command that starts one vLLM replica of this pool (via the exec shim), with
    every `vllm` option of the pool. `device`: `cuda` or `cpu`; None: `cfg.device`, where
    `auto` is what this machine has."""
    if device is None:
        device = detect_device() if cfg.device == "auto" else cfg.device
    engine = VllmEngineConfig(
        model=model,
        python=python,
        device=device,
        host=host,
        port=port,
        version=version,
        **cfg.vllm.model_dump(),
    )
    return [sys.executable, "-m", "cua_rl.inference.vllm_engine", engine.model_dump_json()]


def replica_launch(
    cfg: ModelServersConfig,
    *,
    name: str,
    index: int,
    model: str,
    port: int,
    version: int,
    token: str | None,
    python: str | None,
    host: str = "127.0.0.1",
    devices: tuple[str, ...] | None = None,
    device: str | None = None,
) -> ProcessLaunch:
    """How replica `index` of the pool `name` starts: the one description used by the
    launcher here, by Ray's replica actors and by `cua-rl train --dry-run`. `python`:
    vLLM's interpreter (None: the hf engine); `devices`: its CUDA_VISIBLE_DEVICES (None:
    inherited); `device`: the vLLM build (`cuda`/`cpu`; None: this machine's)."""
    env = {
        "OMP_NUM_THREADS": str(cfg.threads),
        "TOKENIZERS_PARALLELISM": "false",
        **owner_env(),
        **({TOKEN_ENV: token} if token else {}),
    }
    if devices is not None:
        env[VISIBLE_ENV] = ",".join(devices)
    if python is not None:
        # a replica given devices is a CUDA replica; None: what this machine has
        device = device or ("cuda" if devices else None)
        argv = vllm_argv(cfg, model, python, port, version, host=host, device=device)
    else:
        argv = [
            sys.executable,
            "-m",
            "cua_rl.cli",
            "serve",
            "--engine",
            "hf",
            "--model",
            model,
            "--host",
            host,
            "--port",
            str(port),
            "--threads",
            str(cfg.threads),
            "--version",
            str(version),
        ]
    return ProcessLaunch(f"{name} replica {index}", tuple(argv), env, tuple(devices or ()))
