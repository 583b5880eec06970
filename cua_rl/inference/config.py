"""Typed settings of model-server pools: replicas, engines and request deadlines.

Kept apart from the services that use them (launcher, pool, vLLM engine) so that
loading a run's configuration imports no client, server or subprocess code.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

TINY = "tiny"
"""Model name that selects the locally built tiny Qwen3-VL checkpoint."""


class SupervisionConfig(BaseModel):
    """How a pool's replicas are watched and restarted."""

    model_config = ConfigDict(extra="forbid")

    health_interval_s: float = Field(2.0, gt=0)
    """Period of the `/health` probe of serving replicas (and of the check that their
    process still runs): a dead replica is noticed within this even with no traffic."""
    health_timeout_s: float = Field(10.0, gt=0)
    """Deadline of one probe; a replica that misses it is taken out of routing. Generous:
    the hf engine answers /health from its event loop while a batch decodes."""
    unresponsive_after_s: float = Field(60.0, gt=0)
    """A replica whose process runs but that has not answered /health for this long is
    restarted (a hung server)."""
    restart_attempts: int = Field(3, ge=1, le=20)
    """Restarts tried per incident before the replica is given up on."""
    restart_backoff_s: float = Field(2.0, ge=0)
    """Base of the exponential backoff between restarts (full jitter)."""
    max_restart_backoff_s: float = Field(60.0, ge=0)
    """Cap of that backoff."""
    retry_given_up_s: float | None = Field(600.0, gt=0)
    """A replica given up on is tried again (a new incident, `restart_attempts` more)
    this long after: a run of days outlives a bad minute (a soak whose replica was
    killed three times while it loaded lost its reward model for good). None: never."""


class InferencePoolConfig(BaseModel):
    """Deadlines of requests to a model pool (policy or reward model)."""

    model_config = ConfigDict(extra="forbid")

    request_timeout_s: float = Field(120.0, gt=0)
    """Total time one request may take on one replica before it counts as hung and is
    retried elsewhere. 120 s covers a 512-token answer of an 8B model on a loaded
    vLLM replica several times over (~20-40 tokens/s per sequence); the old 300 s
    let one hung server stall an episode for 50 minutes over 10 tries."""
    connect_timeout_s: float = Field(10.0, gt=0)
    """A replica that does not accept the connection in this time is down."""
    max_attempts: int = Field(3, ge=1, le=20)
    """Replicas tried per request. 3: a second and third replica cover one bad
    replica; beyond that the pool is down and waiting is the job of
    `wait_for_replica_s`, not of more attempts."""
    wait_for_replica_s: float = Field(600.0, gt=0)
    """How long a request waits for some replica to be serving again (e.g. being
    restarted and caught up) before it fails and aborts its episode. Long, because
    restarting an 8B vLLM replica and loading its weights takes minutes; short tests
    lower it. Requests fail at once when every replica has been given up on."""
    probe_interval_s: float = Field(1.0, gt=0)
    """Polling interval of a down replica's `/health` (by its supervisor)."""
    probe_timeout_s: float = Field(5.0, gt=0)
    """Timeout of one `/health` probe (a hung replica stays down)."""
    max_in_flight_per_replica: int = Field(64, ge=1, le=4096)
    """Requests one replica holds at once; more wait in the pool for a slot (on any
    replica, up to `wait_for_replica_s`). Each replica's client also keeps at most this
    many connections plus a few for probes and weight updates (`client.CONTROL_CONNECTIONS`):
    before, a hung replica held up to aiohttp's 100 sockets of the judge until
    supervision restarted it. 64 judge requests of 3 votes are 192 sequences, most of
    vLLM's default batch of 256; a policy pool holds about one request per actor."""
    stall_factor: float | None = Field(3.0, gt=1.0)
    """Route around a replica whose oldest request in flight is older than this many
    times the oldest of every other serving replica (and `stall_after_s`), and that has
    answered nothing for `stall_after_s`: a hung server that still accepts requests
    (and may still answer /health) gets no new ones before supervision restarts it
    (`supervision.unresponsive_after_s`) or its requests time out; they end there and
    are retried elsewhere. Routing returns to it once its old requests end. The
    replica with the youngest oldest request is never routed around. None: off."""
    stall_after_s: float = Field(20.0, gt=0)
    """The least age of a replica's oldest request, and of its last answer, before it
    counts as stalled (`stall_factor`). Above a normal answer of the tiny model (a
    second) and well below `request_timeout_s`: an 8B thinking model's 512-token vote
    takes 15-25 s on a loaded replica, so its peers' oldest requests are about that
    old and a hung replica is passed over after about 3 times that, before 120 s."""


class VllmOptions(BaseModel):
    """Server options of a vLLM pool (model_servers.vllm); defaults fit both builds."""

    model_config = ConfigDict(extra="forbid")

    served_model_name: str | None = None
    """Name clients send as `model`; defaults to the model path."""
    tensor_parallel_size: int = Field(default=1, ge=1)
    """GPUs one replica spans (vLLM's --tensor-parallel-size)."""
    gpu_memory_utilization: float | None = Field(default=None, gt=0.0, le=1.0)
    """None: 0.85 on GPU; 0.1 on CPU, where vLLM reads it as a share of host memory."""
    cpu_kv_cache_gib: float = Field(default=1.0, gt=0)
    """CPU build only: KV cache size (VLLM_CPU_KVCACHE_SPACE)."""
    max_model_len: int | None = Field(default=32768, ge=1)
    """Context length in tokens (3 screenshots plus a thinking model's reasoning fit
    in 32k); None: the model's own."""
    dtype: str | None = None
    """None: float32 on CPU (exact logprobs, tiny models), the checkpoint's dtype on GPU."""
    max_images_per_prompt: int = Field(default=3, ge=0)
    """Screenshots per request (policy: last 3; PRM: 2)."""
    max_logprobs: int = Field(default=20, ge=0)
    """Most logprobs a request may ask for (we ask for the sampled token's)."""
    logprobs_mode: str = "processed_logprobs"
    """See the module docstring: keeps behavior logprobs those of the sampled distribution."""
    enable_prefix_caching: bool = True
    """Sticky routing sends an episode's turns to one replica so this cache hits."""
    max_num_seqs: int | None = Field(default=None, ge=1)
    """Sequences batched at once per replica; None: vLLM's default."""
    seed: int = 0
    """Seed of vLLM's sampler (per-request seeds still apply)."""
    mm_processor_kwargs: dict[str, Any] | None = None
    """e.g. {"max_pixels": 1003520} to cap screenshot tokens."""
    extra_args: list[str] = Field(default_factory=list)
    """Appended verbatim (escape hatch for flags not modelled here)."""


class ModelServersConfig(BaseModel):
    """One model role's inference pool (policy or reward model)."""

    model_config = ConfigDict(extra="forbid")

    engine: Literal["hf", "vllm"] = "hf"
    """`hf`: transformers server (CPU, tests, small models); `vllm`: production."""
    model: str = TINY
    """Checkpoint directory, `tiny` (built on first use), or a hub id for vllm."""
    replicas: int = Field(1, ge=1, le=64)
    """Replicas to start on this machine (ignored when `urls` is set)."""
    urls: list[str] = Field(default_factory=list)
    """Use these running servers instead of starting any."""
    log_max_mb: int = Field(32, ge=1)
    """Size at which a replica's log (`RUN/logs/<pool>-<i>.log`) is copied to `.1` and
    cut (inference/replica_log.py), so a replica keeps at most twice this. Replicas
    started by Ray actors keep the default."""
    threads: int = Field(1, ge=1)
    """CPU threads per replica (hf: torch threads; vLLM CPU build: OMP_NUM_THREADS)."""
    ready_timeout_s: float = Field(300.0, gt=0)
    """Deadline for a replica to answer /health after start (a vLLM CPU replica
    needs about a minute)."""
    python: str | None = None
    """vllm: interpreter of the vLLM install (e.g. a CUDA vLLM venv on a GPU node);
    None: the environment `./setup.sh --vllm` builds."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """vllm: which build `python` is; auto: cuda when an NVIDIA device exists."""
    vllm: VllmOptions = Field(default_factory=VllmOptions)
    """vllm: server options (memory, context length, dtype, extra flags)."""
    requests: InferencePoolConfig = Field(default_factory=InferencePoolConfig)
    """Deadlines and attempts of requests to this pool (a hung or bad replica costs at
    most these)."""
    supervision: SupervisionConfig = Field(default_factory=SupervisionConfig)
    """Health probes and restarts of this pool's replicas (a dead or hung replica is
    restarted and caught up to the current weights before it serves again)."""
