"""Typed settings of actors and the fleet (the judge's are in reward/config.py)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class EpisodeConfig(BaseModel):
    """How one episode talks to the policy and the desktop."""

    model_config = ConfigDict(extra="forbid")

    max_steps: int = Field(15, ge=1, le=500)
    """Step limit; an episode that reaches it ends with status step_limit."""
    temperature: float = Field(1.0, ge=0.0)
    """Policy sampling temperature (0 = greedy, the evaluation protocol)."""
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    """Keep 1.0 for training: engines agree on logprobs exactly only then."""
    max_tokens: int = Field(512, ge=1)
    """Response token budget per step."""
    coords: Literal["relative", "absolute"] = "relative"
    """Qwen3-VL coordinate convention: 0..1000 relative, or resized-image pixels."""
    history_images: int = Field(3, ge=1, le=16)
    """Screenshots in the policy's context, the current one included (the method: 3,
    i.e. the 2 latest past steps replayed as screenshot + response turns); every past
    step also appears as a `Step k:` line of the action history."""
    settle_max_s: float = Field(10.0, ge=0.0, le=120.0)
    """After a task's setup, poll the screen until two consecutive screenshots
    agree, for at most this long, before the first observation (apps such as
    GIMP, VLC and Chrome draw a blank window first); 0 disables."""
    strict_setup: bool = True
    """A failed setup step (an app that cannot launch, a command that cannot run)
    fails the task run as `setup_failed` with its reason, instead of OSWorld's
    warning-and-continue that scores an unprepared desktop as a plain 0."""
    wait_after_action_s: float = Field(0.0, ge=0.0)
    """Pause after each action before the next screenshot (OSWorld eval: 5 s)."""
    screenshot_format: Literal["jpeg", "png"] = "jpeg"
    """Transport format of screenshots from the guest (JPEG is ~7x faster)."""
    screenshot_quality: int = Field(90, ge=10, le=100)
    """JPEG quality of screenshots sent to the policy and stored (`jpeg` format only)."""
    screenshot_encoder: Literal["auto", "pillow"] = "auto"
    """Our guest's JPEG encoder: `auto` (default) is its fastest, libjpeg-turbo straight
    from the captured BGRA buffer when the guest has simplejpeg; `pillow` asks for the
    path before issue 51 (an RGB copy, then Pillow's encoder). Guests that are not ours
    ignore it."""
    min_pixels: int = Field(65536, ge=1024)
    """Smart-resize lower bound of an image given to a model."""
    max_pixels: int = Field(1310720, ge=1024)
    """Smart-resize upper bound (1920x1080 becomes 1504x832 by default)."""
    record: bool = False
    """Record each episode's screen (the guest's /start_recording) into
    RUN_DIR/recordings/<trajectory id>.mp4; a failed recording never fails the
    episode. Off in training (it costs guest CPU); an eval may turn it on."""


class FleetConfig(BaseModel):
    """Actors and task groups."""

    model_config = ConfigDict(extra="forbid")

    actors: int = Field(2, ge=1)
    """Concurrent episodes in this process (usually the number of desktops)."""
    group_size: int = Field(2, ge=1)
    """G: rollouts per task group, scored together."""
    max_groups: int | None = Field(None, ge=1)
    """Stop after this many groups (None: until the task source is exhausted)."""
    eta: int = Field(2, ge=0)
    """Staleness bound: start only while serving >= learner - eta."""
    max_attempts: int = Field(3, ge=1)
    """Aborted attempts of one rollout before it is given up (and counted)."""
    spare_desktops: int = Field(0, ge=0)
    """Desktops prepared ahead of the actors: this many more desktops are started beside
    `desktops.count`, and each waits reset and set up for a rollout the scheduler will
    hand out soon (its queued tickets first, then the task source's forecast of the next
    groups), so an actor takes a ready desktop instead of waiting for a setup. The
    look-ahead never asks the task source early, so which task or variant each ticket
    gets is what it would be without spares. 0 (default): off."""
    fork_groups: bool = False
    """Set a group's task up once and start each of its rollouts from a fork of that
    prepared desktop (the VM's memory, devices and disk saved once, restored per
    rollout), where the provider can hold a desktop's whole state (`qemu`); elsewhere,
    and for tasks whose setup is not deterministic (`cua_rl/desktop/fork_safety.py`),
    each rollout sets up as before. Default off."""
    set_aside_after: int | None = Field(6, ge=1)
    """Aborts in a row of one task variant (none of its rollouts completing in between)
    after which the variant is poisoned: it is set aside with its last abort reason, its
    remaining rollouts are given up, and the run goes on with the others. None: never."""


class HorizonSchedule(BaseModel):
    """AgentGym-RL's ScalingInter: the step limit grows h1 < h2 < ... every `every`
    policy updates, so early training sees short, cheap episodes."""

    model_config = ConfigDict(extra="forbid")

    steps: list[int] = Field(min_length=1)
    """Step limits h1 < h2 < ..., the last one kept once reached."""
    every: int = Field(ge=1)
    """Delta: policy updates between two growth points."""

    @model_validator(mode="after")
    def _increasing(self) -> HorizonSchedule:
        if any(b <= a for a, b in zip(self.steps, self.steps[1:], strict=False)):
            raise ValueError(f"horizon steps must increase strictly, got {self.steps}")
        return self

    def max_steps(self, policy_version: int) -> int:
        return self.steps[min(policy_version // self.every, len(self.steps) - 1)]
