"""The agent side of an evaluation: the prompt (as a hash of the exact messages the
policy gets), the action and observation spaces, the images in its context and
their encoding, the sampling parameters and token budget, the protocol and every
deviation from it.

The prompt hash is taken over messages built by the same function the actors use
(`agent.policy_messages`), with placeholders for the instruction, screenshots and
past responses, at the run's screen size and coordinate mode: any change to the
prompt texts, the tool schema or the way past steps are replayed changes it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from cua_rl.agent import policy_messages
from cua_rl.agent.context import model_image_size
from cua_rl.config import RunConfig
from cua_rl.report.eval_protocol import protocol

OSWORLD_SCREEN = (1920, 1080)
"""Screen of OSWorld's VM image (docker, qemu, aws desktops)."""
ACTION_SPACE = "pyautogui"
"""What reaches the desktop: pyautogui code (from Qwen3-VL's computer_use calls)."""
OBSERVATION_TYPE = "screenshot"


def screen_of(cfg: RunConfig) -> tuple[int, int]:
    """The desktops' screen size: the provider's setting, else OSWorld's image's."""
    provider = cfg.desktops.provider
    if provider.type in ("local", "container"):
        return provider.width, provider.height
    if provider.type == "aws" and provider.image_kind == "fleet-host":
        return provider.fleet_width, provider.fleet_height
    return OSWORLD_SCREEN


def prompt_hash(cfg: RunConfig, screen: tuple[int, int]) -> str:
    """sha256 of the policy's messages at step 3 of an episode (two past steps
    replayed) with placeholder inputs (see the module docstring)."""
    episode = cfg.episode
    messages = policy_messages(
        "<instruction>",
        ["<action 1>", "<action 2>"],
        ["<screenshot 0>", "<screenshot 1>", "<screenshot 2>"],
        screen,
        episode.coords,
        responses=["<response 1>", "<response 2>"],
        image_size=model_image_size(screen, episode),
        max_images=episode.history_images,
    )
    return hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()


def _get(data: dict[str, Any], key: str) -> Any:
    node: Any = data
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def protocol_section(cfg: RunConfig) -> dict[str, Any]:
    """OSWorld's protocol (the osworld-verified-eval preset's keys) and every key of
    this run that differs from it, as `key: value (protocol: value)`."""
    fixed = protocol()
    data = cfg.model_dump(mode="json")
    deviations = [
        f"{key}: {_get(data, key)!r} (protocol: {value!r})"
        for key, value in fixed.items()
        if _get(data, key) != value
    ]
    return {"name": "osworld-verified", "keys": fixed, "deviations": deviations}


def agent_section(cfg: RunConfig) -> dict[str, Any]:
    """The manifest's `agent`."""
    episode = cfg.episode
    screen = screen_of(cfg)
    return {
        "prompt_hash": prompt_hash(cfg, screen),
        "action_space": ACTION_SPACE,
        "tool": "computer_use",
        "coords": episode.coords,
        "observation_type": OBSERVATION_TYPE,
        "screen": list(screen),
        "model_image_size": list(model_image_size(screen, episode)),
        "history_images": episode.history_images,
        "screenshot_format": episode.screenshot_format,
        "screenshot_quality": episode.screenshot_quality
        if episode.screenshot_format == "jpeg"
        else None,
        "min_pixels": episode.min_pixels,
        "max_pixels": episode.max_pixels,
        "sampling": {
            "temperature": episode.temperature,
            "top_p": episode.top_p,
            "max_tokens": episode.max_tokens,
        },
        "max_steps": episode.max_steps,
        "wait_after_action_s": episode.wait_after_action_s,
        "settle_max_s": episode.settle_max_s,
        "strict_setup": episode.strict_setup,
        "protocol": protocol_section(cfg),
    }
