"""Typed settings of a learner: the off-policy-corrected loss, the optimizer, the engine.

Defaults follow the paper (docs/algorithms.md) and work on a CPU with the tiny model.
Pydantic only (no torch), so the CLI can validate a run config without loading torch.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cua_rl.learner.checkpoint_keep import Keeping


class LossConfig(BaseModel):
    """PPO (or GSPO) on the proximal ratio, times a truncated behavior importance weight,
    plus k3 KL to a frozen reference (loss.py has the formulas)."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["ppo", "gspo"] = "ppo"
    """The ratio to the proximal policy: `ppo`, one per token; `gspo`, one
    length-normalized ratio per sequence, shared by its tokens. What the loss is
    averaged over is `aggregation`'s choice, for both kinds."""
    clip_eps: float = Field(0.2, gt=0.0, lt=1.0)
    """PPO clip range: the ratio is clipped to [1 - eps, 1 + eps]."""
    gspo_clip_low: float = Field(3e-4, gt=0.0, lt=1.0)
    """GSPO's lower clip range (sequence ratios stay near 1, so it is tiny)."""
    gspo_clip_high: float = Field(4e-4, gt=0.0)
    """GSPO's upper clip range."""
    is_cap: float = Field(2.0, gt=0.0)
    """C: behavior importance weights `exp(logp_prox - logp_behavior)` above it are
    capped (mode `truncate`) or dropped (mode `mask`)."""
    is_mode: Literal["truncate", "mask"] = "truncate"
    """`truncate` uses `min(w, C)`; `mask` removes tokens (GSPO: sequences) with w > C
    from the policy term; they still count in the normalizer and the KL term."""
    kl_beta: float = Field(0.01, ge=0.0)
    """Weight of the k3 KL estimate to the reference model (0 skips the reference)."""
    aggregation: Literal["token", "step", "trajectory"] = "step"
    """How token terms are averaged over a mini-batch. `token`: every response token
    weighs the same, so long responses and long (failed) trajectories dominate;
    `step`: every step sample weighs the same (its tokens averaged first), matching
    advantages that are defined per step; `trajectory`: every episode weighs the
    same (steps averaged within it first). Default `step`: one decision, one vote,
    whatever the length of its reasoning (docs/algorithms.md, "loss aggregation").
    With `kind: gspo`, `step` is GSPO's sequence mean; `token` weighs each sequence
    by its length."""


class TorchEngineConfig(BaseModel):
    """A single-process learner on plain PyTorch (tests, the tiny model, one GPU)."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["torch"] = "torch"
    """Selects this engine in the `engine` union."""
    device: str = "cpu"
    """Torch device of the policy and the reference model."""


class DeepSpeedEngineConfig(BaseModel):
    """A data-parallel learner on DeepSpeed; every rank runs the same config."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["deepspeed"] = "deepspeed"
    """Selects this engine in the `engine` union."""
    zero_stage: Literal[0, 1, 2, 3] = 2
    """ZeRO stage: 1 shards optimizer state, 2 also gradients, 3 also parameters."""
    bf16: bool = False
    """Train in bf16 (GPU). CPU runs keep float32, so logprobs match the hf server."""
    dist_backend: Literal["gloo", "nccl"] = "gloo"
    """Collective backend: `gloo` on CPU, `nccl` on GPU."""


EngineConfig = Annotated[TorchEngineConfig | DeepSpeedEngineConfig, Field(discriminator="type")]


class LearnerConfig(BaseModel):
    """One learner (policy or reward model): what it trains on and how it steps."""

    model_config = ConfigDict(extra="forbid")

    engine: EngineConfig = Field(default_factory=TorchEngineConfig)
    """`torch` (single process) or `deepspeed` (data parallel, ZeRO)."""
    lr: float = Field(1e-6, gt=0.0)
    """AdamW peak learning rate."""
    weight_decay: float = Field(0.0, ge=0.0)
    """AdamW decoupled weight decay."""
    betas: tuple[float, float] = (0.9, 0.999)
    """AdamW betas."""
    adam_eps: float = Field(1e-8, gt=0.0)
    """AdamW epsilon (numerical floor of the second-moment denominator)."""
    grad_clip: float = Field(1.0, gt=0.0)
    """Global gradient-norm clip applied before every optimizer step."""
    warmup_steps: int = Field(0, ge=0)
    """Linear warmup of the learning rate over this many optimizer steps, then constant."""
    micro_batch_tokens: int = Field(8192, ge=1)
    """Padded-token budget of one forward/backward; samples are packed by length up to it
    and gradients accumulate over the micro-batches of a mini-batch. A longer sample
    still forms a micro-batch of its own."""
    mini_batches: int = Field(1, ge=1)
    """Optimizer steps per `train_step`: the batch is split into this many mini-batches,
    all judged against the proximal logprobs taken before the first one (PPO epochs)."""
    temperature: float = Field(1.0, ge=0.0)
    """Sampling temperature of the servers that produced the samples; logprobs are
    recomputed as `log_softmax(logits / T)` (T = 0: T = 1, as the servers report). In a
    run it follows episode.temperature (policy) or judge.temperature (reward model),
    resolved when the config is loaded."""
    loss: LossConfig = Field(default_factory=LossConfig)
    entropy_top_fraction: float | None = Field(None, gt=0.0, le=1.0)
    """Off (None) by default, and off in the paper's preset. f in (0, 1]: train only
    the ceil(f x N) steps (samples) of an update whose mean token entropy, taken in the
    proximal pass at the sampling temperature, is highest (DART-GUI); N counts every
    sample of the update on every rank, ties go to the earlier sample. The others give
    no gradient and count as unused (`<role>_unused_low_entropy`). Mini-batches are
    cut before the selection; the loss is averaged over the selected samples of each
    (docs/algorithms.md, "high-entropy steps")."""
    reference_model: str | None = None
    """Checkpoint of the frozen KL reference; None means the initial checkpoint."""
    seed: int = 0
    """Torch seed set when the engine starts (rank added under DeepSpeed)."""
    ranks: int = Field(1, ge=1)
    """DeepSpeed ranks of this learner (data parallel). 1: the engine runs in the
    driver's process, as always; N > 1: N rank processes started by the run
    (`runtime: local`) or N Ray actors in one placement group (`runtime: ray`),
    each given its token-balanced share of every update (docs/learner-ranks.md).
    Needs `engine.type: deepspeed`; a run resumes only on the same number."""
    rank_cpus: float = Field(1.0, gt=0)
    """CPUs of one rank: its bundle under Ray, its torch threads (OMP_NUM_THREADS,
    at least 1) in a local rank process."""
    rank_gpus: float = Field(0.0, ge=0)
    """GPUs in one rank's Ray bundle (1 on a GPU cluster, with `engine.dist_backend:
    nccl`); local rank processes use GPU `LOCAL_RANK` when the backend is nccl."""
    rank_timeout_s: float = Field(3600.0, gt=0)
    """Deadline of one call to the ranks (an update, a checkpoint, a weight gather);
    a rank that dies fails the call at once, whatever is left of the deadline."""
    keep_last: int = Field(2, ge=1)
    """Checkpoints kept after each update: the newest this many (`--resume` needs the
    last; learner/checkpoint_keep.py), besides `keep_every` and `keep_versions`."""
    keep_every: int = Field(0, ge=0)
    """Also keep every N-th version's checkpoint (N, 2N, ...), for `cua-rl export model
    --version` and `cua-rl eval --model RUN_DIR@VERSION` after the run; 0: none. A
    checkpoint holds the optimizer's state too (an 8B policy: ~100 GB)."""
    keep_versions: list[int] = Field(default_factory=list)
    """Versions kept whatever the rules above say (an experiment's intermediate
    evaluations); more can be pinned while the run goes (`checkpoints/<role>/keep.json`,
    `checkpoint_keep.pin_version`)."""

    def keeping(self) -> Keeping:
        """The checkpoint keeping rule of this learner (`checkpoint_keep`)."""
        return Keeping(self.keep_every, self.keep_last, frozenset(self.keep_versions))

    @model_validator(mode="after")
    def _ranks_need_deepspeed(self) -> LearnerConfig:
        if self.ranks > 1 and self.engine.type != "deepspeed":
            raise ValueError(
                f"ranks={self.ranks} needs engine.type=deepspeed (the torch engine is one process)"
            )
        return self


class LearnerLoopConfig(BaseModel):
    """How a learner service turns queued task groups into updates."""

    model_config = ConfigDict(extra="forbid")

    sync_every: int = Field(1, ge=1)
    """Push weights to the inference pool every K updates."""
    queue_updates: int = Field(2, ge=1)
    """Update-sized batches of groups that may wait for the learner; the producer
    (the fleet's group handler) waits beyond that. A sample kept when its group
    completed is at most `eta + queue_updates` versions old when it is trained."""


class WeightSyncConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mode: Literal["checkpoint", "collective"] = "collective"
    """`collective` streams tensors (no disk); `checkpoint` goes through a directory
    every replica can read (shared filesystem across nodes)."""
    host: str = "127.0.0.1"
    """Address replicas use to reach the learner's rendezvous store (collective)."""
    timeout_s: float = Field(600.0, gt=0)
    """Deadline of one weight update on a replica (a large model's transfer takes minutes)."""
    keep_exports: int = Field(1, ge=1)
    """Checkpoint mode: exported versions kept on disk (older ones are removed)."""
    bucket_mb: int = Field(8, ge=0)
    """Collective mode: consecutive tensors of one dtype travel as one broadcast of at
    most this many MiB (a larger tensor alone, uncopied), so small tensors (norms,
    biases) do not pay a collective each: Qwen3-VL-8B's 750 tensors go in 480
    broadcasts at 8. Larger buckets copy large tensors into them, which cost more than
    the collectives they save in `cua-rl bench weight-sync` (docs/learner-ranks.md);
    the sender holds one bucket per dtype while it packs. 0: one broadcast per tensor
    (the protocol before buckets)."""
    from_rank0: bool = True
    """A learner of several ranks (or Ray rank actors): rank 0 broadcasts its gathered
    weights to each replica itself, the driver only hosting the link's rendezvous
    (`collective` mode). False: rank 0 hands the full weights to the driver, which
    sends them (for a rank 0 that cannot reach the replicas or `host`)."""
    staggered: bool = True
    """Take each replica out of routing while it takes the new weights: new requests go
    to the others instead of waiting behind its swap (those already on it finish
    there), then it is routed again. With one serving replica it stays routed and
    requests wait for it. `false`: every replica stays routed during its own update
    (the behaviour before this switch). Ray fleet workers' pools follow the driver's
    (runtime/ray/routing.py)."""
