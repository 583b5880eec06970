"""cua-rl's code inside a vLLM server process: weight updates and the version header.

This file runs in vLLM's own interpreter, which does not have cua-rl installed (it
would pull the project's torch and transformers over vLLM's pins). So it imports
only the standard library at module level, and vLLM, torch, starlette and
safetensors (all in any vLLM environment) inside functions. The launcher puts its
directory, which holds nothing else, on the server's PYTHONPATH and names two
objects on vLLM's command line:

- `--middleware cua_rl_vllm.version_middleware`: in the API server. Every response
  carries `x-model-version`; `/health` answers JSON as the hf engine does; and
  `POST /update_weights` takes the hf engine's bodies (`{version, path}` or
  `{version, collective: {host, port, manifest, bucket_bytes}}`), so the project's client and
  weight sync talk to both engines alike. It and vLLM's other state-changing routes
  require `Authorization: Bearer $CUA_RL_MODEL_TOKEN` (401 otherwise). An update waits
  for the completions in flight, blocks new ones, loads the weights, drops the
  prefix, multimodal and encoder caches, and only then serves the new version: a
  completion's version is that of every one of its tokens (streamed responses are
  released at their first byte, so this holds for non-streamed ones).
- `--worker-extension-cls cua_rl_vllm.WeightSyncExtension`: mixed into each vLLM
  worker; the middleware calls its methods through `collective_rpc`.

Broadcast transport: the learner hosts a TCPStore and broadcasts the manifest's
tensors, in order, over a two-party gloo group, consecutive tensors of one dtype
packed into flat buckets of at most `bucket_bytes` (absent or 0: one tensor per
broadcast). This is the protocol of cua_rl/inference/weight_transfer.py, which this
file repeats (`bucket_layout` included; a unit test holds the copies equal) because
it cannot import it. Tensors arrive on the CPU, as views into fresh bucket buffers,
and are loaded only once all have arrived; `load_weights` copies them to the
worker's device, so the same path serves CPU and GPU replicas with one worker.
"""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

VERSION_HEADER = "x-model-version"
VERSION_ENV = "CUA_RL_MODEL_VERSION"
"""Version served until the first update (the launcher sets it)."""
TOKEN_ENV = "CUA_RL_MODEL_TOKEN"
"""The run's credential for ADMIN_ROUTES (cua_rl/inference/server_auth.py); unset: those
routes answer loopback clients only."""
ADMIN_ROUTES = frozenset(
    {
        "/update_weights",
        "/reset_prefix_cache",
        "/sleep",
        "/wake_up",
        "/collective_rpc",
        "/start_profile",
        "/stop_profile",
    }
)
"""Routes that change the server's state (ours and vLLM's development ones)."""
STORE_PREFIX = "cua-rl-weights"
"""Must equal STORE_PREFIX of cua_rl/inference/weight_transfer.py, whose sender waits
for the `joined` key under it."""
_ITEM_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int64": 8}
_DTYPES = tuple(_ITEM_BYTES)


def iter_checkpoint_tensors(path: str | Path) -> Iterator[tuple[str, Any]]:
    """(name, tensor) for every tensor in the safetensors shards of a checkpoint dir."""
    from safetensors import safe_open

    shards = sorted(Path(path).glob("*.safetensors"))
    if not shards:
        raise FileNotFoundError(f"{path}: no *.safetensors shards in the checkpoint directory")
    for shard in shards:
        with safe_open(str(shard), framework="pt") as f:
            for name in f.keys():  # noqa: SIM118 - safe_open has no __iter__
                yield name, f.get_tensor(name)


def bucket_layout(manifest: list[dict[str, Any]], bucket_bytes: int) -> list[tuple[int, int]]:
    """(start, stop) manifest ranges sent as one broadcast each: consecutive tensors of
    one dtype while the bucket stays within `bucket_bytes`, a larger tensor alone, and
    every tensor alone for 0 (copy of weight_transfer.bucket_layout)."""
    sizes = [math.prod(i["shape"]) * _ITEM_BYTES[i["dtype"]] for i in manifest]
    if bucket_bytes <= 0:
        return [(i, i + 1) for i in range(len(manifest))]
    buckets: list[tuple[int, int]] = []
    start, filled = 0, 0
    for i, size in enumerate(sizes):
        if i > start and (
            manifest[i]["dtype"] != manifest[start]["dtype"] or filled + size > bucket_bytes
        ):
            buckets.append((start, i))
            start, filled = i, 0
        filled += size
    if manifest:
        buckets.append((start, len(manifest)))
    return buckets


def receive_tensors(
    host: str,
    port: int,
    manifest: list[dict[str, Any]],
    timeout_s: float = 300.0,
    bucket_bytes: int = 0,
) -> list[tuple[str, Any]]:
    """Join the learner's two-party gloo group as rank 1 and receive the manifest, cut
    into the sender's buckets; the tensors are views into fresh bucket buffers."""
    import torch
    import torch.distributed as dist

    layout = bucket_layout(manifest, bucket_bytes)  # before joining: parse_update checked it
    timeout = timedelta(seconds=timeout_s)
    store = dist.TCPStore(host, port, world_size=2, is_master=False, timeout=timeout)
    store.set(f"{STORE_PREFIX}/joined", "1")  # the learner waits for this before linking
    group = dist.ProcessGroupGloo(dist.PrefixStore(STORE_PREFIX, store), 1, 2, timeout)
    opts = dist.BroadcastOptions()
    opts.rootRank = 0
    out = []
    for start, stop in layout:
        items = manifest[start:stop]
        sizes = [math.prod(item["shape"]) for item in items]
        flat = torch.empty(sum(sizes), dtype=getattr(torch, items[0]["dtype"]))
        group.broadcast([flat], opts).wait()
        offset = 0
        for item, size in zip(items, sizes, strict=True):
            out.append((item["name"], flat[offset : offset + size].view(item["shape"])))
            offset += size
    return out


class WeightSyncExtension:
    """Methods added to each vLLM worker (`self.model_runner` is the worker's)."""

    model_runner: Any
    device: Any

    def _model(self) -> Any:
        return self.model_runner.get_model()

    def _load(self, weights: Iterator[tuple[str, Any]]) -> None:
        """Load checkpoint-format tensors into the running model, in place.

        The model runner's `reload_weights` redoes what loading does after the raw
        copy (e.g. the CPU build repacks linear weights, whose parameters then lose
        their loaders, so a plain `model.load_weights` fails on a second load)."""
        reload = getattr(self.model_runner, "reload_weights", None)
        if reload is not None:
            reload(weights_iterator=weights)
        else:
            self._model().load_weights(weights=weights)
        self._synchronize()

    def update_weights_from_path(self, path: str) -> None:
        """Load every tensor of the checkpoint at `path` into the running model."""
        self._load(iter_checkpoint_tensors(path))

    def update_weights_from_link(
        self,
        host: str,
        port: int,
        manifest: list[dict[str, Any]],
        timeout_s: float,
        bucket_bytes: int = 0,
    ) -> None:
        """Receive all tensors first, then load them: no step runs on a half-sent model
        (the engine runs no step while this call is in progress anyway)."""
        tensors = receive_tensors(host, port, manifest, timeout_s, bucket_bytes)
        self._load(iter(tensors))

    def init_weight_update_group(
        self, master_address: str, master_port: int, rank_offset: int, world_size: int
    ) -> None:
        """GPU only: join an NCCL group the learner created (learner rank 0)."""
        from vllm.distributed.device_communicators.pynccl import PyNcclCommunicator
        from vllm.distributed.parallel_state import get_world_group
        from vllm.distributed.utils import StatelessProcessGroup

        rank = get_world_group().rank + rank_offset
        group = StatelessProcessGroup.create(
            host=master_address, port=master_port, rank=rank, world_size=world_size
        )
        self.weight_update_group = PyNcclCommunicator(group, device=self.device)

    def update_weight_from_broadcast(self, name: str, dtype: str, shape: list[int]) -> None:
        """GPU only: receive one tensor over the NCCL group and load it under `name`."""
        import torch

        tensor = torch.empty(shape, dtype=getattr(torch, dtype), device=self.device)
        self.weight_update_group.broadcast(tensor, src=0, stream=torch.cuda.current_stream())
        self._model().load_weights(weights=[(name, tensor)])

    def _synchronize(self) -> None:
        import torch

        if torch.cuda.is_available() and str(getattr(self, "device", "cpu")).startswith("cuda"):
            torch.cuda.synchronize()


class _Gate:
    """Completions share the engine; an update has it alone (a readers-writer lock)."""

    def __init__(self) -> None:
        self.version = int(os.environ.get(VERSION_ENV, "0") or 0)
        self.active = 0
        self.updating = False
        self._cond: asyncio.Condition | None = None

    @property
    def cond(self) -> asyncio.Condition:
        if self._cond is None:  # created in the server's event loop
            self._cond = asyncio.Condition()
        return self._cond

    async def enter(self) -> int:
        async with self.cond:
            await self.cond.wait_for(lambda: not self.updating)
            self.active += 1
            return self.version

    async def leave(self) -> None:
        async with self.cond:
            self.active -= 1
            self.cond.notify_all()

    async def begin_update(self) -> None:
        async with self.cond:
            await self.cond.wait_for(lambda: not self.updating)
            self.updating = True
            await self.cond.wait_for(lambda: self.active == 0)

    async def end_update(self, version: int | None) -> None:
        async with self.cond:
            if version is not None:
                self.version = version
            self.updating = False
            self.cond.notify_all()


_GATE = _Gate()


class _BadRequest(Exception):
    def __init__(self, param: str, message: str) -> None:
        super().__init__(message)
        self.param = param
        self.message = message


def _error(message: str, param: str | None, status: int) -> Any:
    from starlette.responses import JSONResponse

    kind = "invalid_request_error" if status < 500 else "internal_error"
    body = {"error": {"message": message, "type": kind, "param": param, "code": None}}
    return JSONResponse(body, status_code=status, headers={VERSION_HEADER: str(_GATE.version)})


def parse_update(body: Any) -> tuple[int, str | dict[str, Any]]:
    """(version, checkpoint path or link) from an /update_weights body (hf engine's shape)."""
    if not isinstance(body, dict):
        raise _BadRequest("body", "expected a JSON object {version, path} or {version, collective}")
    version = body.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise _BadRequest("version", "expected an integer")
    if "collective" in body:
        link = body["collective"]
        if (
            not isinstance(link, dict)
            or not isinstance(link.get("host"), str)
            or not isinstance(link.get("port"), int)
            or not isinstance(link.get("manifest"), list)
        ):
            raise _BadRequest("collective", "expected {host: str, port: int, manifest: list}")
        bad = [
            i
            for i in link["manifest"]
            if not isinstance(i, dict)
            or not isinstance(i.get("name"), str)
            or i.get("dtype") not in _DTYPES
            or not isinstance(i.get("shape"), list)
            or not all(
                isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in i["shape"]
            )
        ]
        if bad:
            raise _BadRequest(
                "collective.manifest",
                f"expected entries {{name, shape (list "
                f"of non-negative integers), dtype in {_DTYPES}}}; got "
                f"{str(bad[0])[:200]}",
            )
        buckets = link.get("bucket_bytes", 0)
        if not isinstance(buckets, int) or isinstance(buckets, bool) or buckets < 0:
            raise _BadRequest("collective.bucket_bytes", "expected a non-negative integer")
        return version, link
    path = body.get("path")
    if not isinstance(path, str) or not (Path(path) / "config.json").is_file():
        raise _BadRequest("path", "expected a checkpoint directory containing config.json")
    return version, path


async def _update(request: Any) -> Any:
    from starlette.responses import JSONResponse

    try:
        try:
            body = await request.json()
        except ValueError:
            raise _BadRequest("body", "expected a JSON body") from None
        version, source = parse_update(body)
    except _BadRequest as exc:
        return _error(exc.message, exc.param, 400)
    engine = request.app.state.engine_client
    await _GATE.begin_update()
    new_version = None
    try:
        if isinstance(source, str):
            await engine.collective_rpc("update_weights_from_path", args=(source,))
        else:
            timeout_s = float(source.get("timeout_s", 600.0))
            await engine.collective_rpc(
                "update_weights_from_link",
                args=(
                    source["host"],
                    source["port"],
                    source["manifest"],
                    timeout_s,
                    source.get("bucket_bytes", 0),
                ),
            )
        # Caches computed with the old weights: KV of shared prefixes, encoder outputs.
        await engine.reset_prefix_cache()
        await engine.reset_mm_cache()
        await engine.reset_encoder_cache()
        new_version = version
    except Exception as exc:  # noqa: BLE001 - answer as JSON; the replica keeps serving
        return _error(f"weight update failed: {exc!r}"[:2000], None, 500)
    finally:
        await _GATE.end_update(new_version)
    return JSONResponse({"version": version}, headers={VERSION_HEADER: str(version)})


def admin_allowed(header: str | None, token: str | None, peer: str | None) -> bool:
    """Copy of cua_rl/inference/server_auth.py's check (this file cannot import it)."""
    import hmac
    import ipaddress

    if token is None:
        try:
            return peer is not None and ipaddress.ip_address(peer).is_loopback
        except ValueError:
            return False
    if not header or not header.startswith("Bearer "):
        return False
    given = header.removeprefix("Bearer ").strip()
    try:
        return hmac.compare_digest(given.encode("utf-8"), token.encode("utf-8"))
    except UnicodeEncodeError:
        return False


async def version_middleware(request: Any, call_next: Any) -> Any:
    """vLLM `--middleware`: /update_weights, and the version header on every response."""
    path = request.url.path
    if path in ADMIN_ROUTES:
        peer = request.client.host if request.client is not None else None
        if not admin_allowed(
            request.headers.get("authorization"), os.environ.get(TOKEN_ENV) or None, peer
        ):
            return _error(
                "missing or wrong credential (Authorization: Bearer <run token>)",
                "Authorization",
                401,
            )
    if path == "/update_weights" and request.method == "POST":
        return await _update(request)
    if path == "/health":  # the hf engine's body: clients parse /health as JSON
        response = await call_next(request)
        if response.status_code != 200:
            return response
        from starlette.responses import JSONResponse

        version = _GATE.version
        return JSONResponse(
            {"status": "ok", "version": version, "updating": _GATE.updating},
            headers={VERSION_HEADER: str(version)},
        )
    if not path.startswith("/v1/"):
        response = await call_next(request)
        response.headers[VERSION_HEADER] = str(_GATE.version)
        return response
    version = await _GATE.enter()
    try:
        response = await call_next(request)
    finally:
        await _GATE.leave()
    response.headers[VERSION_HEADER] = str(version)
    return response
