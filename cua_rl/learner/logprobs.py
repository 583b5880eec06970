"""Recomputing response-token logprobs with a model, under the servers' convention.

Convention (cua_rl/inference/sampling.py): `log_softmax(logits / T)[token]`, with
T = 0 (greedy) reported as T = 1. The learner must use the temperature the
samples were drawn at; otherwise the ratio to the behavior policy is biased.

Positions follow the hf engine: M-RoPE position ids come from the model's own
`get_rope_index` with the attention mask, and the lm head runs only on the
positions that predict a response token, so the full (B, L, vocab) logits of a
long multimodal prompt are never materialized.
"""

from __future__ import annotations

from typing import Any

import torch

from cua_rl.inference.sampling import behavior_logprobs
from cua_rl.learner.batching import MicroBatch


def core_model(model: Any) -> Any:
    """The HF `...ForConditionalGeneration` behind a DeepSpeed engine (or the model itself)."""
    return getattr(model, "module", model)


def position_ids(model: Any, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """(3, B, L) M-RoPE positions, computed as the hf engine computes them for a prefill."""
    ids, _ = core_model(model).model.get_rope_index(
        inputs["input_ids"],
        mm_token_type_ids=inputs["mm_token_type_ids"],
        image_grid_thw=inputs.get("image_grid_thw"),
        attention_mask=inputs["attention_mask"],
    )
    return ids


def _distributions(model: Any, batch: MicroBatch, temperature: float) -> torch.Tensor:
    """(N, vocab) float32 log-distributions that predict the batch's response tokens."""
    inputs = batch.inputs
    # Logits at position p predict the token at p + 1: shift the response mask left.
    predictors = torch.zeros_like(batch.response_mask)
    predictors[:, :-1] = batch.response_mask[:, 1:]
    out = model(
        **inputs,
        position_ids=position_ids(model, inputs),
        use_cache=False,
        logits_to_keep=predictors,
    )
    return behavior_logprobs(out.logits, temperature)


def _pick(batch: MicroBatch, logprobs: torch.Tensor) -> torch.Tensor:
    targets = batch.inputs["input_ids"][batch.response_mask]
    return logprobs.gather(-1, targets[:, None])[:, 0]


def response_logprobs(model: Any, batch: MicroBatch, temperature: float) -> torch.Tensor:
    """(N,) logprobs of the batch's response tokens, flat in `MicroBatch` order.

    Differentiable when called with grad enabled; `model` may be a DeepSpeed engine
    (its forward is used, so ZeRO-3 gathers parameters as usual).
    """
    return _pick(batch, _distributions(model, batch, temperature))


@torch.no_grad()
def batch_logprobs(model: Any, batches: list[MicroBatch], temperature: float) -> list[torch.Tensor]:
    """Detached logprobs of several micro-batches (the proximal and reference passes)."""
    return [response_logprobs(model, b, temperature).detach() for b in batches]


@torch.no_grad()
def batch_logprobs_entropy(
    model: Any, batches: list[MicroBatch], temperature: float
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """The proximal pass when steps are selected by entropy: each micro-batch's (N,)
    logprobs and (N,) token entropies `-sum_v p_v log p_v` of the distribution the
    token was sampled from (same temperature), taken from the one forward that is
    needed anyway, where the full distribution is at hand."""
    logps, entropies = [], []
    for b in batches:
        logprobs = _distributions(model, b, temperature)
        logps.append(_pick(b, logprobs).detach())
        entropies.append(torch.special.entr(logprobs.exp()).sum(-1).detach())
    return logps, entropies
