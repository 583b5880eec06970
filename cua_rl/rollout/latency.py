"""The latency model of `cua-rl bench fleet --simulated`: how long every piece of
desktop, model and learner work takes, and how much of each the cluster has.

Both the asynchronous fleet and the synchronous baseline draw from this one
model with the same capacities, so a difference in throughput comes from the
orchestration only. The defaults describe OSWorld-style training of an 8B
vision-language policy and reward model served by vLLM (RLAnything's setup);
each field says where its number comes from. Override any of them with
`--latency FILE` (YAML or JSON with the same nesting).
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Dist(BaseModel):
    """A duration in seconds: log-normal around `median_s`, clipped to [min_s, max_s].

    Log-normal because service times are skewed to the right (a few slow
    resets, long generations) and never negative.
    """

    model_config = ConfigDict(extra="forbid")

    median_s: float = Field(gt=0.0)
    sigma: float = Field(0.3, ge=0.0, le=3.0)
    """Spread in log space (0.3: the 90th percentile is ~1.5x the median)."""
    min_s: float = Field(0.0, ge=0.0)
    max_s: float | None = Field(None, gt=0.0)

    def draw(self, rng: random.Random) -> float:
        value = (
            rng.lognormvariate(math.log(self.median_s), self.sigma)
            if self.sigma
            else (self.median_s)
        )
        value = max(self.min_s, value)
        return min(self.max_s, value) if self.max_s is not None else value

    @property
    def mean_s(self) -> float:
        """Mean of the unclipped distribution (for sizing estimates only)."""
        return self.median_s * math.exp(self.sigma**2 / 2)


class EpisodeSteps(BaseModel):
    """Steps until the policy emits `terminate`: rounded log-normal in [min, max].

    Defaults give a mean of ~10 steps, a 90th percentile of 20 and ~3 % of
    episodes reaching the 30-step limit (RLAnything trains with 30 steps).
    Successful OSWorld trajectories of 7-8B agents take ~8-15 steps, failures
    often run to the limit: hence the heavy right tail.
    """

    model_config = ConfigDict(extra="forbid")

    median: float = Field(8.0, gt=0.0)
    sigma: float = Field(0.7, ge=0.0, le=3.0)
    min: int = Field(3, ge=1)
    max: int = Field(30, ge=1)

    @model_validator(mode="after")
    def _ordered(self) -> EpisodeSteps:
        if self.max < self.min:
            raise ValueError(f"episode_steps.max {self.max} < min {self.min}")
        return self

    def draw(self, rng: random.Random) -> int:
        steps = round(rng.lognormvariate(math.log(self.median), self.sigma))
        return min(self.max, max(self.min, steps))

    def mean(self, samples: int = 4000, seed: int = 1) -> float:
        rng = random.Random(seed)
        return sum(self.draw(rng) for _ in range(samples)) / samples


class Capacity(BaseModel):
    """What the cluster has per desktop. Scaled with the number of desktops so that
    100 and 1,000 actors are the same deployment at two sizes."""

    model_config = ConfigDict(extra="forbid")

    policy_batch: int = Field(32, ge=1)
    """Max concurrent requests of one policy replica (vLLM max_num_seqs). 32
    multimodal contexts of ~5k tokens fit the KV cache of one 80 GB GPU with an
    8B model."""
    actors_per_policy_replica: float = Field(32.0, gt=0.0)
    """Replicas = ceil(actors / this): every desktop can have a request in flight,
    so neither mode is starved by the policy."""
    prm_batch: int = Field(32, ge=1)
    """Max concurrent requests of one reward-model replica (same model size)."""
    actors_per_prm_replica: float = Field(32.0, gt=0.0)
    """As many PRM replicas as policy replicas (RLAnything: PRM and policy are
    both 8B). The judge's in-flight cap is set to the same total."""
    actors_per_learner_node: float = Field(32.0, gt=0.0)
    """Learner nodes (8 GPUs each, data parallel) = ceil(actors / this). With the
    default `learner_s_per_group` a node trains ~0.1 group/s while 32 actors
    make ~0.075: the learner keeps up with the async fleet with ~25 % headroom.
    A faster learner helps the baseline (its training phase shrinks) more than
    the async fleet, which is bound by generation."""

    def policy_replicas(self, actors: int) -> int:
        return math.ceil(actors / self.actors_per_policy_replica)

    def prm_replicas(self, actors: int) -> int:
        return math.ceil(actors / self.actors_per_prm_replica)

    def learner_nodes(self, actors: int) -> int:
        return math.ceil(actors / self.actors_per_learner_node)


def _d(median_s: float, sigma: float = 0.3, **kw: float) -> Dist:
    return Dist(median_s=median_s, sigma=sigma, **kw)


class LatencyModel(BaseModel):
    """Every simulated duration, in unscaled seconds."""

    model_config = ConfigDict(extra="forbid")

    episode_steps: EpisodeSteps = Field(default_factory=EpisodeSteps)
    reset_s: Dist = Field(default_factory=lambda: _d(10.0, 0.35, min_s=3.0))
    """Desktop reset + task setup. OSWorld VM snapshot revert plus setup steps
    (download files, open the app, wait for the window) takes ~5-15 s on
    docker/KVM; AWS instances are slower. Our `local` provider targets <= 3 s
    reset (DESIGN 8) but setup steps still cost seconds."""
    act_s: Dist = Field(default_factory=lambda: _d(1.5, 0.3))
    """Execute one action and let the screen settle. OSWorld's /execute of one
    click measured 272 ms here (DESIGN 8); a settle pause of ~1 s (OSWorld
    evaluation uses 5 s, training setups 0.5-2 s) dominates."""
    screenshot_s: Dist = Field(default_factory=lambda: _d(0.11, 0.2))
    """One screenshot: OSWorld /screenshot measured 108 ms as PNG (DESIGN 8)."""
    evaluate_s: Dist = Field(default_factory=lambda: _d(3.0, 0.4))
    """OSWorld evaluate(): postconfig, fetch result files from the VM, compare
    (2-5 s for office tasks; some getters open apps and take longer)."""
    policy_s: Dist = Field(default_factory=lambda: _d(2.5, 0.35))
    """One policy call of an 8B VL model on vLLM: ~5k prompt tokens (3 screenshots
    of ~1.2k visual tokens each + history; prefix cache via sticky routing) and
    ~100-300 generated tokens at ~60-100 tok/s per sequence in a batch: ~1.5-3 s."""
    prm_s: Dist = Field(default_factory=lambda: _d(3.0, 0.35))
    """One PRM request (two screenshots, m = 3 votes sampled with n = 3, each a
    short reasoning then \\boxed{}): ~2-4 s."""
    batch_slowdown: float = Field(0.3, ge=0.0, le=5.0)
    """A call on a full replica takes (1 + this) times as long as on an idle one
    (decode is memory-bound: per-sequence speed drops mildly with batch size)."""
    learner_s_per_group: float = Field(10.0, gt=0.0)
    """Training on one task group on one 8-GPU node: 8 rollouts x ~10 steps x ~5.5k
    tokens = ~440k tokens; forward+backward plus proximal and reference
    logprobs ~ 10 x 8e9 FLOP/token = 3.5e16 FLOP at ~40 % MFU on 8 H100s: ~10 s."""
    weight_sync_s: Dist = Field(default_factory=lambda: _d(5.0, 0.2))
    """Broadcast 16 GB of bf16 weights to the inference replicas and reload
    (OpenRLHF / AReaL report a few seconds to ~10 s for 7-8B). Staggered (the
    default), the policy replicas are withheld one at a time, each for its share of
    it; with a global pause (OpenRLHF's weight lock) all pause for all of it."""
    success_rate: float = Field(0.3, ge=0.0, le=1.0)
    """Probability that the evaluator scores an episode 1 (no effect on timing)."""
    policy_tokens: int = Field(16, ge=1)
    """Token ids + logprobs per policy response. Real responses carry ~100-300
    (thinking models more) and the run store JSON-encodes them per step, which
    is host CPU the bench then counts: raise this to include that cost."""
    prm_tokens: int = Field(16, ge=1)
    """Token ids + logprobs per reward-model vote (real votes: ~100-300)."""
    time_scale: float | None = Field(None, gt=0.0, le=1.0)
    """Every sleep is multiplied by this. None: chosen per run so that the
    simulated step rate stays under `max_sim_steps_per_s` (a faster clock would
    make the one event loop, not the modelled cluster, the bottleneck)."""
    max_sim_steps_per_s: float = Field(300.0, gt=0.0)
    """Steps per wall second the simulation may ask of one process: at ~1 ms of
    CPU per step the event loop and the run store's writer thread stay under
    ~40 % busy on a 2-core host, so simulated latencies are not stretched."""
    capacity: Capacity = Field(default_factory=Capacity)

    @classmethod
    def load(cls, path: str | Path | None) -> LatencyModel:
        """Defaults, or the defaults overridden by a YAML/JSON file."""
        if path is None:
            return cls()
        text = Path(path).read_text()
        if str(path).endswith((".yaml", ".yml")):
            import yaml

            data = yaml.safe_load(text) or {}
        else:
            data = json.loads(text)
        return cls.model_validate(data)

    def episode_s(self, steps: float) -> float:
        """Expected desktop time of an episode of `steps` steps (uncontended)."""
        per_step = self.policy_s.mean_s + self.act_s.mean_s + self.screenshot_s.mean_s
        return (
            self.reset_s.mean_s
            + self.screenshot_s.mean_s
            + steps * per_step
            + self.evaluate_s.mean_s
        )

    def expected_steps_per_s(self, actors: int) -> float:
        """Uncontended async step rate in simulated seconds (for the time scale)."""
        mean_steps = self.episode_steps.mean()
        return actors * mean_steps / self.episode_s(mean_steps)
