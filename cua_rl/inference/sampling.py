"""Token sampling with exact behavior logprobs (the hf engine's sampler).

Definition, relied on by the learner's off-policy correction: the logprob
returned for a sampled token is `log_softmax(logits / temperature)[token]`,
i.e. of the temperature-scaled distribution BEFORE top-p truncation
(vLLM's `--logprobs-mode processed_logprobs` without top-p, see vllm_engine.py).
Temperature 0 means greedy decoding; its logprobs are those of temperature 1
(`log_softmax(logits)`), because a one-hot distribution carries no information.
Top-p (nucleus) only restricts which tokens may be drawn; it never rescales the
reported logprob. Train with top_p = 1 when the ratio must be exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

GREEDY_EPS = 1e-5
"""Temperatures below this are treated as greedy (as vLLM does)."""


@dataclass(frozen=True, slots=True)
class SamplingParams:
    """How one request's choices are drawn (already validated by the HTTP layer)."""

    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 256
    stop: tuple[str, ...] = ()
    seed: int | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature < GREEDY_EPS


def behavior_logprobs(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """Log-probabilities of the distribution a token is sampled from (see module doc)."""
    logits = logits.float()
    if temperature >= GREEDY_EPS:
        logits = logits / temperature
    return torch.log_softmax(logits, dim=-1)


def nucleus_mask(logprobs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Boolean mask of the tokens kept by top-p (always at least the most likely one)."""
    if top_p >= 1.0:
        return torch.ones_like(logprobs, dtype=torch.bool)
    probs = logprobs.exp()
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    # A token is kept if the mass strictly before it is < top_p.
    mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs
    keep_sorted = mass_before < top_p
    keep_sorted[..., 0] = True
    keep = torch.zeros_like(keep_sorted)
    keep.scatter_(-1, order, keep_sorted)
    return keep


def sample_token(
    logits: torch.Tensor, params: SamplingParams, generator: torch.Generator
) -> tuple[int, float]:
    """Draw one token from a 1-D logits row; return (token id, behavior logprob)."""
    logprobs = behavior_logprobs(logits, params.temperature)
    if params.greedy:
        token = int(torch.argmax(logprobs).item())
    else:
        keep = nucleus_mask(logprobs, params.top_p)
        probs = torch.where(keep, logprobs.exp(), torch.zeros_like(logprobs))
        token = int(torch.multinomial(probs, 1, generator=generator).item())
    return token, float(logprobs[token].item())


def make_generator(seed: int | None) -> torch.Generator:
    """A private RNG per request: a seeded request is reproducible whatever it is batched with."""
    generator = torch.Generator()
    if seed is None:
        generator.seed()
    else:
        generator.manual_seed(seed)
    return generator
