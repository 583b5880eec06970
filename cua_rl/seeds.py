"""Seeds derived from a run's one `seed`, the same in every process and on every run.

A run has one top-level `seed` (None: unseeded, as before it existed). Every source of
randomness the run controls takes a seed derived from it by name: each sampling
request (a rollout's policy step, the reward model's votes on that step, a critique, a
rewrite), each learner's torch seed and each vLLM engine's own seed, unless the config
sets that one explicitly. A derived seed depends only on the run seed and the parts
that name its use (e.g. `("rollout", group index, slot, attempt)`), never on timing or
the process it is computed in: Python's `hash` is salted per process, so a digest is
used. Seeds fit in 31 bits, which every consumer (vLLM's request seed, torch, numpy)
accepts.
"""

from __future__ import annotations

import hashlib

SEED_MODULUS = 2**31


def derive_seed(seed: int | None, *parts: object) -> int | None:
    """The seed for the use named by `parts` under `seed`; None when `seed` is None (the
    use stays unseeded). Parts are compared by their `repr`: use ints and strings."""
    if seed is None:
        return None
    digest = hashlib.sha256(repr((int(seed), *parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") % SEED_MODULUS


class SeedSequence:
    """Numbered seeds for a stream of requests of one kind (`derive_seed(seed, name, n)`
    for n = 0, 1, ...), for callers with no natural identity of their own (the critic,
    the rewriter): their requests are reproducible as long as they come in the same
    order, which one actor and one task order give."""

    def __init__(self, seed: int | None, name: str) -> None:
        self.seed, self.name = seed, name
        self.count = 0

    def next(self) -> int | None:
        value = derive_seed(self.seed, self.name, self.count)
        self.count += 1
        return value
