"""Which path a weight sync takes per role, and what one costs, for the placement plan.

The learner sends its weights to each replica one after another (staggered sync,
`train.sync.staggered`), each as the dtype it trains in: bf16 on a GPU learner with
`engine.bf16`, float32 otherwise (learner/weight_sync.py). `collective` mode is a gloo
broadcast over TCP from the learner's host memory on GPU and CPU alike (the vLLM side
also has NCCL receiver methods, which the sender does not use: no GPU run has
measured them, docs/vllm.md); `checkpoint` mode writes a directory every replica
reads. The estimate divides the bytes by the gloo rate `cua-rl bench weight-sync`
measured (`GLOO_BYTES_PER_S`, its command and date beside it), so it is as good as
that machine's loopback is a stand-in for the cluster's network: a lower bound on
the time where the network is slower than the loopback.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from cua_rl.config import RunConfig
from cua_rl.config.roles import run_roles
from cua_rl.learner.config import DeepSpeedEngineConfig, LearnerConfig
from cua_rl.learner.model_shapes import ModelShape

GLOO_BYTES_PER_S = 1.61e9
"""Transfer rate of the learner's bucketed broadcast into the vLLM side's receiver, gloo
over 127.0.0.1 (`stream_bytes_per_s` of `cua-rl bench weight-sync --mb 2048 --bucket-mb
0,1,4,8,16,32,64,256 --repeats 5 --json` at the default 8 MiB buckets, 2026-12-02, load
2.3-4.3 on 2 cores; docs/learner-ranks.md has the table)."""
LINK_SETUP_S = 0.2
"""Opening the two-party link, per replica and sync (the same bench)."""
GLOO_BASIS = (
    "`cua-rl bench weight-sync` on 2 CPU cores, gloo over 127.0.0.1: 0.2 s link "
    "set-up + bytes / 1.61 GB/s (2026-12-02; docs/learner-ranks.md)"
)


@dataclass(frozen=True)
class SyncPath:
    role: str
    mode: str
    """`collective` or `checkpoint` (`train.sync.mode`)."""
    transport: str
    dtype: str
    """What the learner sends: bf16 or float32."""
    gigabytes: float | None
    """Per replica (None: the model's size is unknown)."""
    replicas: int
    seconds_per_replica: float | None
    seconds_per_sync: float | None
    """All replicas of the role, one after another."""
    basis: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def sent_dtype(learner: LearnerConfig) -> tuple[str, int]:
    """(dtype, bytes per parameter) of what the learner sends."""
    engine = learner.engine
    if isinstance(engine, DeepSpeedEngineConfig) and engine.bf16:
        return "bf16", 2
    return "float32", 4


def sync_paths(cfg: RunConfig, shapes: dict[str, ModelShape | None]) -> list[SyncPath]:
    """One path per role whose weights train (the frozen reward model has none)."""
    out = []
    for role in run_roles(cfg).learners:
        learner: LearnerConfig = getattr(cfg.train, role)
        servers = getattr(cfg, role)
        dtype, width = sent_dtype(learner)
        shape = shapes.get(role)
        size = shape.params * width if shape is not None else None
        replicas = len(servers.urls) or servers.replicas
        if cfg.train.sync.mode == "collective":
            buckets = (
                f"in {cfg.train.sync.bucket_mb} MiB buckets"
                if cfg.train.sync.bucket_mb
                else "one tensor per broadcast"
            )
            transport = (
                "gloo broadcast over TCP from the learner's host memory to each "
                f"replica {buckets}, one replica after another"
            )
            if servers.vllm.tensor_parallel_size > 1 and servers.engine == "vllm":
                transport += (
                    "; with tensor_parallel_size > 1 every vLLM worker would join "
                    "the two-party link: use train.sync.mode=checkpoint (docs/vllm.md)"
                )
            each = LINK_SETUP_S + size / GLOO_BYTES_PER_S if size is not None else None
            basis = GLOO_BASIS
        else:
            transport = (
                "a checkpoint directory written once and read by every replica "
                "(shared storage across nodes)"
            )
            each, basis = None, "not estimated: the storage's speed decides"
        out.append(
            SyncPath(
                role,
                cfg.train.sync.mode,
                transport,
                dtype,
                None if size is None else round(size / 1e9, 2),
                replicas,
                None if each is None else round(each, 1),
                None if each is None else round(each * replicas, 1),
                basis,
            )
        )
    return out
