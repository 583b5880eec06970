"""Which GPU each process of a `runtime: local` run gets, decided before any starts.

Invariants (issue: the first GPU node must not start every replica on GPU 0):
- every vLLM replica on GPU gets its own device(s) (`tensor_parallel_size` of them);
- every learner rank process gets one device, and the two learners never share one;
- the driver keeps exactly the devices of the learners it runs in its own process
  (a learner of one rank), none when it runs none;
- nothing shares a device unless `resources.share_gpus` asks; a run that needs more
  devices than the node has is refused with one line saying what would fit.

The same layout serves the launch (`CUDA_VISIBLE_DEVICES` of each child, the driver's
own) and `cua-rl train --dry-run`, so what the dry run prints is what starts. Devices
are handed out in role order: replicas of the policy, reward-model and rewriter pools,
then the policy's learner, then the reward model's.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from cua_rl.config import RunConfig
from cua_rl.config.roles import run_roles
from cua_rl.errors import ConfigError
from cua_rl.inference.config import ModelServersConfig
from cua_rl.inference.gpus import VISIBLE_ENV, visible_gpus
from cua_rl.learner.config import DeepSpeedEngineConfig, LearnerConfig
from cua_rl.process_launch import ProcessLaunch

if TYPE_CHECKING:
    from cua_rl.learner.engines import TransportFactory


def replica_gpus(servers: ModelServersConfig, node_has_gpus: bool) -> int:
    """Devices one replica of the pool takes: a vLLM replica on CUDA takes its tensor
    parallel size; hf replicas, CPU vLLM and servers given by `urls` take none."""
    if servers.urls or servers.engine != "vllm":
        return 0
    device = servers.device if servers.device != "auto" else ("cuda" if node_has_gpus else "cpu")
    return servers.vllm.tensor_parallel_size if device == "cuda" else 0


def learner_on_gpu(learner: LearnerConfig) -> bool:
    """A DeepSpeed learner on NCCL, or a torch learner on a CUDA device: one GPU per rank."""
    engine = learner.engine
    if isinstance(engine, DeepSpeedEngineConfig):
        return engine.dist_backend == "nccl"
    return engine.device.startswith("cuda")


@dataclass(frozen=True, slots=True)
class GpuUser:
    """One process (or in-process learner) that needs devices."""

    role: str
    """`policy replica 0`, `prm learner rank 1`, `policy learner (in the driver)`."""
    kind: str
    """`replica`, `rank` or `driver`."""
    name: str
    """The pool or learner (`policy`, `prm`, `rewriter`)."""
    index: int
    gpus: int


def gpu_users(cfg: RunConfig, node_has_gpus: bool, learners: bool = True) -> list[GpuUser]:
    """Everything of the run that takes devices, in the order they are handed out
    (`learners`: False for a rollout or an evaluation, which start none)."""
    roles = run_roles(cfg)
    users: list[GpuUser] = []
    pools = {"policy": cfg.policy, "prm": cfg.prm, "rewriter": cfg.adapt.rewriter.pool}
    for name in roles.pools:
        servers = pools[name]
        if n := replica_gpus(servers, node_has_gpus):
            users += [
                GpuUser(f"{name} replica {i}", "replica", name, i, n)
                for i in range(servers.replicas)
            ]
    for name in roles.learners if learners else ():
        learner: LearnerConfig = getattr(cfg.train, name)
        if not learner_on_gpu(learner):
            continue
        if learner.ranks > 1:
            users += [
                GpuUser(f"{name} learner rank {r}", "rank", name, r, 1)
                for r in range(learner.ranks)
            ]
        else:
            users.append(GpuUser(f"{name} learner (in the driver)", "driver", name, 0, 1))
    return users


@dataclass(frozen=True)
class DeviceLayout:
    """Devices per process of one node's run; empty on a CPU run."""

    node_gpus: tuple[str, ...]
    assigned: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """`GpuUser.role` -> its device ids (what its CUDA_VISIBLE_DEVICES names)."""
    users: tuple[GpuUser, ...] = ()
    shared: bool = False
    """Some devices serve more than one process (`resources.share_gpus`)."""

    @property
    def uses_gpus(self) -> bool:
        return bool(self.users)

    def replica(self, pool: str, index: int) -> tuple[str, ...] | None:
        """A replica's devices; None when it takes none (hf, CPU)."""
        return self.assigned.get(f"{pool} replica {index}")

    def rank(self, learner: str, rank: int) -> tuple[str, ...] | None:
        return self.assigned.get(f"{learner} learner rank {rank}")

    def driver(self) -> tuple[str, ...]:
        """The driver's devices: those of its in-process learners, in learner order."""
        return tuple(d for u in self.users if u.kind == "driver" for d in self.assigned[u.role])

    def in_driver_index(self, learner: str) -> int | None:
        """The index of an in-process learner's device within the driver's devices."""
        driver = [u for u in self.users if u.kind == "driver"]
        return next((i for i, u in enumerate(driver) if u.name == learner), None)


def device_layout(
    cfg: RunConfig, node_gpus: Sequence[str], *, learners: bool = True
) -> DeviceLayout:
    """Hand out `node_gpus` to the run's processes, or refuse in one line (`learners`:
    False for a rollout or an evaluation)."""
    users = gpu_users(cfg, bool(node_gpus), learners)
    needed = sum(u.gpus for u in users)
    gpus = tuple(node_gpus)
    if needed == 0:
        return DeviceLayout(gpus)
    shared = needed > len(gpus)
    if shared and (not cfg.resources.share_gpus or not gpus):
        raise ConfigError(_refusal(cfg, users, needed, len(gpus)))
    assigned, next_gpu = {}, 0
    for user in users:
        assigned[user.role] = tuple(gpus[(next_gpu + k) % len(gpus)] for k in range(user.gpus))
        next_gpu += user.gpus
    return DeviceLayout(gpus, assigned, tuple(users), shared)


def _refusal(cfg: RunConfig, users: list[GpuUser], needed: int, have: int) -> str:
    counts: dict[str, int] = {}
    for user in users:
        what = f"{user.name} {'replicas' if user.kind == 'replica' else 'learner'}"
        counts[what] = counts.get(what, 0) + user.gpus
    parts = ", ".join(f"{what} {n}" for what, n in counts.items())
    where = (
        "this node has none found (CUDA_VISIBLE_DEVICES, /dev/nvidia*; declare them "
        "with resources.gpus=N)"
        if have == 0
        else f"this node has {have}"
    )
    return (
        f"runtime local: the run needs {needed} GPUs ({parts}) and {where}; "
        f"{_what_fits(cfg, users, needed - have) if have else 'run the models on CPU'}"
        ", or resources.share_gpus=true, or runtime=ray across nodes"
    )


def _what_fits(cfg: RunConfig, users: list[GpuUser], deficit: int) -> str:
    """The smallest change of replica counts that frees `deficit` devices, if one does."""
    per_pool: dict[str, tuple[int, int]] = {}
    for user in users:
        if user.kind == "replica":
            replicas, each = per_pool.get(user.name, (0, user.gpus))
            per_pool[user.name] = (replicas + 1, each)
    for name, (replicas, each) in sorted(per_pool.items(), key=lambda kv: -kv[1][0]):
        drop = -(-deficit // each)
        if replicas - drop >= 1:
            key = "adapt.rewriter.pool" if name == "rewriter" else name
            return f"e.g. {key}.replicas={replicas - drop}"
    return "fewer learner ranks or replicas"


def node_gpus(cfg: RunConfig) -> list[str]:
    """The GPU ids of this node the run may hand out: the first `resources.gpus` of those
    found (all of them when unset); declared ones the driver cannot see (no device nodes
    in its container) are taken at their word as 0..N-1."""
    found = visible_gpus()
    wanted = cfg.resources.gpus
    if wanted is None:
        return found
    return found[:wanted] if len(found) >= wanted else [str(i) for i in range(wanted)]


def pin_driver(layout: DeviceLayout) -> None:
    """The driver sees the devices of its in-process learners only (none when it runs
    none) on a node with GPUs; before anything in it starts CUDA. A CPU node's
    environment is left as it is."""
    if layout.node_gpus:
        os.environ[VISIBLE_ENV] = ",".join(layout.driver())


def driver_launch(layout: DeviceLayout, node: str = "driver") -> ProcessLaunch:
    """The driver's own record (it is already running: no command): the devices of its
    in-process learners, and the CUDA_VISIBLE_DEVICES `pin_driver` gives it."""
    env = {VISIBLE_ENV: ",".join(layout.driver())} if layout.node_gpus else {}
    return ProcessLaunch("driver", (), env, layout.driver(), node)


def in_driver(learner: LearnerConfig, layout: DeviceLayout, role: str) -> LearnerConfig:
    """`learner` as the driver builds it in its own process: a torch engine on CUDA moves
    to its device within the driver's (`cuda:k`); a DeepSpeed engine finds its device
    through LOCAL_RANK (set by `in_driver_rank` while it is built)."""
    k = layout.in_driver_index(role)
    engine = learner.engine
    if k is None or isinstance(engine, DeepSpeedEngineConfig):
        return learner
    return learner.model_copy(update={"engine": engine.model_copy(update={"device": f"cuda:{k}"})})


@contextlib.contextmanager
def in_driver_rank(layout: DeviceLayout, role: str) -> Iterator[None]:
    """LOCAL_RANK of an in-process DeepSpeed learner while it is built: DeepSpeed takes
    its device from it (the learners are built one after the other)."""
    k = layout.in_driver_index(role)
    if k is None:
        yield
        return
    before = os.environ.get("LOCAL_RANK")
    os.environ["LOCAL_RANK"] = str(k)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("LOCAL_RANK", None)
        else:
            os.environ["LOCAL_RANK"] = before


def rank_devices(layout: DeviceLayout, role: str, ranks: int) -> list[tuple[str, ...]] | None:
    """Each rank process's device on a GPU node (empty for a CPU learner there: it sees
    no GPU); None on a CPU node (the ranks inherit the driver's environment)."""
    if not layout.node_gpus:
        return None
    return [layout.rank(role, r) or () for r in range(ranks)]


def replica_devices(layout: DeviceLayout, pool: str, replicas: int) -> list[tuple[str, ...]] | None:
    """Each replica's devices on a GPU node (empty: an hf or CPU replica sees none);
    None on a CPU node."""
    if not layout.node_gpus:
        return None
    return [layout.replica(pool, i) or () for i in range(replicas)]


def local_ranks(devices: list[tuple[str, ...]]) -> TransportFactory:
    """Rank processes on this machine, rank r on `devices[r]` (learner.engines takes it)."""
    from cua_rl.learner.rank_process import ProcessRanks

    def make(cfg: LearnerConfig, model_dir: str, name: str, log_dir: Path) -> ProcessRanks:
        return ProcessRanks(cfg, model_dir, name=name, log_dir=log_dir, devices=devices)

    return make
