"""Start and stop the model-server replicas a run needs.

`hf` replicas are `cua-rl serve --engine hf` child processes on free ports; `vllm`
replicas are vLLM's server in its own interpreter (vllm_engine.py), reached through
`python -m cua_rl.inference.vllm_engine`, which arms the owner's death signal and
execs it. Each replica runs in its own process group so that stopping a run never
leaves one (or a vLLM engine-core child) behind, logs to `<log_dir>/<name>-<i>.log`,
and is polled on /health with a deadline. Servers given as `urls` are used as they
are (e.g. a vLLM deployment managed elsewhere).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import re
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

from cua_rl.errors import ConfigError, InferenceUnavailable
from cua_rl.inference.client import InferenceClient
from cua_rl.inference.config import TINY, ModelServersConfig
from cua_rl.inference.owner_watch import owner_env
from cua_rl.inference.vllm_engine import (
    VllmEngineConfig,
    detect_device,
    resolve_vllm_python,
)

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
                    raise ConfigError(f"{path}: another process has been building the tiny "
                                      f"model for {lock_timeout_s:.0f} s; remove "
                                      f"{lock.name} if no build is running") from None
                await asyncio.sleep(1.0)
        if (path / "config.json").is_file():  # built by whoever held the lock
            return path
        logger.info("building the tiny model in %s (once; about 4 minutes on 2 cores)", path)
        started = time.monotonic()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "cua_rl.cli", "tiny-model", str(path),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
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
            lines = [*lines[-keep + 1:], line]
    return "\n".join(lines)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


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
    cfg: ModelServersConfig, *, name: str, log_dir: Path, tiny_dir: Path | None = None,
    version: int = 0,
) -> AsyncIterator[list[str]]:
    """Yield the base URLs of a ready pool; stop what was started on exit."""
    if cfg.urls:
        yield list(cfg.urls)
        return
    python = resolve_vllm_python(cfg.python) if cfg.engine == "vllm" else None
    tiny = tiny_dir or default_tiny_dir()
    if cfg.model == TINY:
        await ensure_tiny_model(tiny)
    model = resolve_model(cfg, tiny)
    log_dir.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 - once, at start-up
    procs: list[asyncio.subprocess.Process] = []
    urls: list[str] = []
    try:
        for i in range(cfg.replicas):
            port = free_port()
            # Opened once per replica at start-up; the child keeps the descriptor.
            log = open(log_dir / f"{name}-{i}.log", "ab")  # noqa: SIM115, ASYNC230
            env = {**os.environ, "OMP_NUM_THREADS": str(cfg.threads),
                   "TOKENIZERS_PARALLELISM": "false", **owner_env()}
            argv = ([sys.executable, "-m", "cua_rl.cli", "serve", "--engine", "hf", "--model",
                     model, "--port", str(port), "--threads", str(cfg.threads),
                     "--version", str(version)] if python is None
                    else vllm_argv(cfg, model, python, port, version))
            procs.append(await asyncio.create_subprocess_exec(
                *argv, stdout=log, stderr=asyncio.subprocess.STDOUT, env=env,
                start_new_session=True,
            ))
            log.close()
            urls.append(f"http://127.0.0.1:{port}")
        await asyncio.gather(*(
            _wait_healthy(url, proc, cfg.ready_timeout_s, log_dir / f"{name}-{i}.log")
            for i, (url, proc) in enumerate(zip(urls, procs, strict=True))
        ))
        yield urls
    finally:
        await asyncio.gather(*(stop_process(p) for p in procs))


def vllm_argv(cfg: ModelServersConfig, model: str, python: str, port: int, version: int,
              host: str = "127.0.0.1") -> list[str]:
    """The command that starts one vLLM replica of this pool (via the exec shim)."""
    device = detect_device() if cfg.device == "auto" else cfg.device
    engine = VllmEngineConfig(model=model, python=python, device=device, host=host, port=port,
                              version=version, **cfg.vllm.model_dump())
    return [sys.executable, "-m", "cua_rl.inference.vllm_engine", engine.model_dump_json()]


async def _wait_healthy(
    url: str, proc: asyncio.subprocess.Process, deadline_s: float, log: Path
) -> None:
    client = InferenceClient(url, timeout_s=5.0)
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline_s
    try:
        while not await client.health(timeout_s=2.0):
            if proc.returncode is not None:
                raise InferenceUnavailable(
                    f"model server {url} exited ({proc.returncode}):\n"
                    f"{log.read_text(errors='replace')[-2000:]}"  # noqa: ASYNC240 - fatal path
                )
            if loop.time() > end:
                raise InferenceUnavailable(f"model server {url} not healthy after {deadline_s} s")
            await asyncio.sleep(0.2)  # poll interval, not a readiness guess
    finally:
        await client.close()


async def stop_process(proc: asyncio.subprocess.Process, grace_s: float = 5.0) -> None:
    """SIGTERM the process group, SIGKILL it after a grace period."""
    if proc.returncode is not None:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            await asyncio.wait_for(proc.wait(), grace_s)
            return
        except TimeoutError:
            continue
