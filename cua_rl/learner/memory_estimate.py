"""Memory of one learner rank, estimated before a run (for `config show --plan`).

Four parts, each stated with its formula so a user can check it:
- model states (weights, gradients, optimizer): DeepSpeed's own estimators for the
  ZeRO stage (`estimate_zero3_model_states_mem_needs` for 3,
  `estimate_zero2_model_states_mem_needs` for 1 and 2; stage 0 and the torch
  engine as ZeRO-2 on one rank: nothing sharded), without offload. They assume
  mixed precision (16-bit weights and gradients, fp32 masters and Adam moments:
  18-20 bytes per parameter); an fp32 learner holds 16, so they over-estimate it a
  little.
- the KL reference: a whole frozen copy on every rank, float32 as
  `learner/reference.py` loads it (none when `loss.kl_beta` is 0).
- activations kept for the backward of one micro-batch, without recomputation
  (the learner does not checkpoint activations): per token and decoder layer
  about 8 hidden-size and 4 intermediate-size values (norm inputs, q/k/v,
  attention output, residuals; the SwiGLU MLP's gate, up, product and down
  input), in the training dtype. The vision tower's are not counted.
- the response tokens' logits: float32 logits, their log-softmax and its gradient
  (3 x vocab x 4 bytes per response token; learner/logprobs.py computes only
  those rows), counted as if every token of the micro-batch were a response
  token (short samples packed together can come close).
A micro-batch is `micro_batch_tokens` tokens; a single longer sample forms a
micro-batch of its own and then its length counts instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from cua_rl.learner.config import DeepSpeedEngineConfig, LearnerConfig
from cua_rl.learner.model_shapes import ModelShape

GIB = 2**30


@dataclass(frozen=True)
class RankMemory:
    """Bytes one learner rank needs at its peak (training step), by part."""

    model_states: int
    reference: int
    activations: int
    logits: int
    estimator: str
    """Which DeepSpeed estimator gave `model_states`, with its arguments."""

    @property
    def total(self) -> int:
        return self.model_states + self.reference + self.activations + self.logits


def zero_stage(cfg: LearnerConfig) -> int:
    """The ZeRO stage of a learner (the torch engine shards nothing: 0)."""
    return cfg.engine.zero_stage if isinstance(cfg.engine, DeepSpeedEngineConfig) else 0


def estimate_rank_memory(shape: ModelShape, cfg: LearnerConfig, ranks: int) -> RankMemory:
    """One rank's memory when `ranks` ranks train `shape` with `cfg`."""
    states, estimator = _model_states(shape, zero_stage(cfg), ranks)
    bf16 = isinstance(cfg.engine, DeepSpeedEngineConfig) and cfg.engine.bf16
    tokens = cfg.micro_batch_tokens
    activations = (
        shape.layers * tokens * (8 * shape.hidden + 4 * shape.intermediate) * (2 if bf16 else 4)
    )
    logits = tokens * shape.vocab * 4 * 3
    reference = shape.params * 4 if cfg.loss.kl_beta > 0 else 0
    return RankMemory(states, reference, activations, logits, estimator)


def _model_states(shape: ModelShape, stage: int, ranks: int) -> tuple[int, str]:
    from cua_rl.command_output import stdout_to_stderr

    with stdout_to_stderr():  # importing DeepSpeed logs its accelerator on stdout
        from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs
        from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs
    if stage == 3:
        _, gpu, _ = estimate_zero3_model_states_mem_needs(
            shape.params,
            shape.largest_param,
            num_gpus_per_node=ranks,
            num_nodes=1,
            cpu_offload=False,
            cpu_offload_params=False,
            zero_init=True,
        )
        return gpu, f"estimate_zero3_model_states_mem_needs(ranks={ranks}, no offload)"
    sharded = ranks if stage in (1, 2) else 1
    _, gpu = estimate_zero2_model_states_mem_needs(
        shape.params, num_gpus_per_node=sharded, num_nodes=1, cpu_offload=False
    )
    return gpu, f"estimate_zero2_model_states_mem_needs(ranks={sharded}, no offload)"


def ranks_to_fit(
    shape: ModelShape, cfg: LearnerConfig, budget: int, max_ranks: int = 64
) -> int | None:
    """The fewest ranks, a power of two up to `max_ranks` (nodes have 8 GPUs), whose
    per-rank estimate fits `budget`."""
    ranks = 1
    while ranks <= max_ranks:
        if estimate_rank_memory(shape, cfg, ranks).total <= budget:
            return ranks
        ranks *= 2
    return None
