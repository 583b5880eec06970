"""The Qwen3-VL agent protocol: computer_use tool schema, response parsing,
action -> pyautogui code, screenshot encoding and the prompts of every model role.

Pure functions only (no I/O, no model): the actor, the reward pool, the learner and
the adaptation loop all build prompts and read answers through this package so
that a prompt is rebuilt identically wherever it is needed.
"""

from cua_rl.agent.messages import (
    critique_step_messages,
    critique_trajectory_messages,
    parse_prm_vote,
    parse_rewrite,
    policy_messages,
    prm_messages,
    rewrite_messages,
)
from cua_rl.agent.parse import action_sentence, parse_response
from cua_rl.agent.pyautogui_code import is_terminal, terminal_status, to_pyautogui
from cua_rl.agent.tool_schema import computer_use_tool, system_prompt

__all__ = [
    "action_sentence",
    "computer_use_tool",
    "critique_step_messages",
    "critique_trajectory_messages",
    "is_terminal",
    "parse_prm_vote",
    "parse_response",
    "parse_rewrite",
    "policy_messages",
    "prm_messages",
    "rewrite_messages",
    "system_prompt",
    "terminal_status",
    "to_pyautogui",
]
