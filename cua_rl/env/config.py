"""Typed settings of the Gymnasium environment (`cua_rl.env`), with working defaults.

They are the keyword arguments of `gymnasium.make("cua_rl/Local-v0", ...)` beyond the
task choice; an unknown or out-of-range one fails at `make` with pydantic's message
naming the field. Kept apart from the environment so that reading them imports
neither gymnasium nor the desktop stack.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from cua_rl.config import local_by_default
from cua_rl.desktop.providers.config import ProviderConfig
from cua_rl.desktop.providers.local.config import LocalProviderConfig
from cua_rl.reward.config import JudgeConfig


class EnvConfig(BaseModel):
    """How one environment (or each desktop of a vector environment) behaves."""

    model_config = ConfigDict(extra="forbid")

    provider: ProviderConfig = Field(default_factory=LocalProviderConfig)
    """Where the desktop comes from (`{"type": "local"}` by default; any provider of
    docs/providers.md). Environments of one process with equal provider settings share
    that provider and its idle desktops."""
    max_steps: int = Field(15, ge=1, le=500)
    """Steps after which the episode is truncated (and scored, as OSWorld's runner
    scores an episode that reaches its step limit)."""
    coords: Literal["relative", "absolute"] = "absolute"
    """Coordinates of `computer_use` calls: screen pixels of the observation
    (`absolute`) or Qwen3-VL's 0..1000 grid (`relative`)."""
    screenshot_format: Literal["jpeg", "png"] = "jpeg"
    """Transport format of screenshots from the guest (JPEG is ~7x faster; the
    observation is the decoded RGB array either way)."""
    screenshot_quality: int = Field(90, ge=10, le=100)
    """JPEG quality (`jpeg` format only)."""
    accessibility_tree: bool = False
    """Add the desktop's accessibility tree (XML text) to every observation; costs a
    guest round trip per step."""
    max_text_chars: int = Field(1_000_000, ge=1)
    """Upper bound of the observation's text fields (instruction, accessibility tree);
    a longer tree is cut to this length (`info["a11y_truncated"]`)."""
    wait_s: float = Field(1.0, ge=0.0, le=60.0)
    """How long the `WAIT` action pauses (OSWorld's pyautogui action space pauses too)."""
    wait_after_action_s: float = Field(0.0, ge=0.0, le=60.0)
    """Pause after each action before the next screenshot (OSWorld eval: 5 s)."""
    settle_max_s: float = Field(10.0, ge=0.0, le=120.0)
    """After a task's setup, poll the screen until two screenshots agree, at most this
    long, before the first observation (apps draw a blank window first); 0 disables."""
    strict_setup: bool = True
    """A failed setup step fails `reset` with its reason (instead of OSWorld's
    warning-and-continue that scores an unprepared desktop)."""
    reuse_untouched: bool = True
    """A reset to the task variant of the last reset, with no step since, keeps that
    desktop as it is (the reset and setup would rebuild the same state) and only takes
    a new observation; frameworks that reset right after `make` and again at the
    episode's start then pay for one. False: every reset resets the desktop."""
    act_timeout_s: float = Field(30.0, gt=0.0, le=600.0)
    """Deadline of one action on the guest; a timeout is the agent's no-op
    (`info["act"]`), as an exception inside its code is."""
    reset_timeout_s: float = Field(300.0, gt=0.0, le=3600.0)
    """Deadline of one `reset` (lease, desktop reset, task setup, settling)."""
    step_timeout_s: float = Field(300.0, gt=0.0, le=3600.0)
    """Deadline of one `step` (action, screenshot, evaluation at the end, reward model)."""
    judge_urls: list[str] = Field(default_factory=list)
    """OpenAI-compatible reward-model servers (e.g. `cua-rl serve`); non-empty turns on
    the per-step reward model: m votes per step, reported in `info["prm"]`."""
    judge: JudgeConfig = Field(default_factory=JudgeConfig)
    """Votes m, temperature and token budget of the reward model."""
    prm_weight: float = Field(0.0, ge=0.0)
    """lambda: add `lambda * mean vote` (in [-1, 1]) to every step's reward, as the
    method's integrated reward `R_i = O + lambda * mean_j S_ij` does; 0 reports the
    votes in `info` only."""

    @field_validator("judge_urls")
    @classmethod
    def _urls(cls, value: list[str]) -> list[str]:
        bad = [u for u in value if not u.startswith(("http://", "https://"))]
        if bad:
            raise ValueError(f"expected http(s) URLs, got {bad}")
        return value

    @field_validator("provider", mode="before")
    @classmethod
    def _local_by_default(cls, value: object) -> object:
        return local_by_default(value)  # `provider={"width": 1280}` alone: local

    def screen_hint(self) -> tuple[int, int]:
        """The screen size the provider is configured for (every provider's default
        is OSWorld's 1920x1080); the first reset checks it against the desktop."""
        p = self.provider
        width = getattr(p, "width", None) or getattr(p, "fleet_width", 1920)
        height = getattr(p, "height", None) or getattr(p, "fleet_height", 1080)
        return int(width), int(height)
