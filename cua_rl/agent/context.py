"""The policy's context at step i, built the same way by the actor (to sample)
and by the learner (to recompute logprobs): one definition, so the prompt a
learner trains on is byte-identical to the prompt the behavior policy saw.

It lives in agent/, below both rollout (the actor) and reward (the samples that
rebuild prompts from the store), and reads only the four episode settings of
`ContextSettings`, which rollout's `EpisodeConfig` has.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from cua_rl.agent import action_sentence, policy_messages, prompts
from cua_rl.agent.images import resized_image_size
from cua_rl.agent.tool_schema import CoordinateMode
from cua_rl.types import Step

NO_OP_HISTORY = prompts.NO_OP_ACTION


class ContextSettings(Protocol):
    """The episode settings a prompt depends on (`rollout.config.EpisodeConfig` has
    them): a protocol, so the agent package needs nothing of rollout."""

    coords: CoordinateMode
    history_images: int
    min_pixels: int
    max_pixels: int


def history_line(step: Step) -> str:
    """How a finished step appears in the `Step k:` lines of later policy and
    reward-model prompts: its action sentence (without "Action:"), or a stated no-op."""
    if step.parse_error is not None:
        return NO_OP_HISTORY
    return action_sentence(step.response) or prompts.NO_ACTION_SENTENCE


def model_image_size(screen: tuple[int, int], cfg: ContextSettings) -> tuple[int, int]:
    return resized_image_size(screen, min_pixels=cfg.min_pixels, max_pixels=cfg.max_pixels)


def step_messages(
    instruction: str,
    prior_steps: Sequence[Step],
    screenshot_urls: Sequence[str],
    screen: tuple[int, int],
    cfg: ContextSettings,
) -> list[dict[str, Any]]:
    """Messages for the step after `prior_steps`; `screenshot_urls[k]` is the
    screen before step k, and the last one is the current screen. Every prior step
    is a `Step k:` line; the last `cfg.history_images - 1` are also replayed as
    screenshot + full-response turns."""
    return policy_messages(
        instruction,
        [history_line(s) for s in prior_steps],
        list(screenshot_urls)[-cfg.history_images :],
        screen,
        cfg.coords,
        responses=[s.response for s in prior_steps],
        image_size=model_image_size(screen, cfg),
        max_images=cfg.history_images,
    )
