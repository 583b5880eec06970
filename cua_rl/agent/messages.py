"""Chat-message builders for the policy, the reward model, the critic and the rewriter.

All builders return OpenAI chat messages (images as `image_url` parts holding data
URLs) as vLLM and our hf engine accept them, and are pure functions of their
arguments, so the learner can rebuild exactly the prompt an actor sent.

Policy context (DESIGN.md section 6): the system prompt with the tool, one user
turn with the instruction and the text history of the steps whose screenshots are
no longer shown, then the last `MAX_POLICY_IMAGES` screenshots as image turns
interleaved with the assistant responses of those steps, ending on the current
screenshot.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from cua_rl.agent import prompts
from cua_rl.agent.tool_schema import CoordinateMode, system_prompt

Message = dict[str, Any]
MAX_POLICY_IMAGES = 3

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_VOTES: dict[str, Literal[-1, 1]] = {"1": 1, "+1": 1, "-1": -1}


def _image(url: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url}}


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _numbered(lines: Sequence[str], start: int = 1) -> str:
    if not lines:
        return prompts.NO_HISTORY
    return "\n".join(f"Step {start + i}: {line}" for i, line in enumerate(lines))


def _as_action_line(line: str) -> str:
    return line if line.lstrip().startswith("Action:") else f"Action: {line}"


def policy_messages(
    instruction: str,
    history: Sequence[str],
    screenshots: Sequence[str],
    screen: tuple[int, int],
    coords: CoordinateMode = "relative",
    *,
    responses: Sequence[str] | None = None,
    image_size: tuple[int, int] | None = None,
    max_images: int = MAX_POLICY_IMAGES,
) -> list[Message]:
    """The policy prompt for the next step.

    `history[i]` is the "Action: ..." sentence of previous step i; `screenshots` are
    data URLs, oldest first, the last one being the current screen, and align with
    the last steps (`len(screenshots) <= len(history) + 1`). `responses[i]` is the
    full response of step i, replayed as the assistant turn after that step's image;
    without it the step's history line stands in. Only the last `max_images`
    screenshots become images; steps before them are text history.
    """
    n = len(history)
    if not screenshots:
        raise ValueError("policy_messages needs at least the current screenshot")
    if len(screenshots) > n + 1:
        raise ValueError(f"{len(screenshots)} screenshots for {n} previous steps")
    if responses is not None and len(responses) != n:
        raise ValueError(f"{len(responses)} responses for {n} history lines")
    if max_images < 1:
        raise ValueError("max_images must be >= 1")
    shown = list(screenshots[-max_images:])
    first_shown_step = n - (len(shown) - 1)
    user_text = prompts.POLICY_INSTRUCTION.format(
        instruction=instruction, history=_numbered(history[:first_shown_step])
    )
    messages: list[Message] = [
        {"role": "system", "content": system_prompt(screen, coords, image_size)},
        {"role": "user", "content": [_text(user_text), _image(shown[0])]},
    ]
    for offset, url in enumerate(shown[1:]):
        step = first_shown_step + offset
        reply = responses[step] if responses is not None else _as_action_line(history[step])
        messages.append({"role": "assistant", "content": reply})
        messages.append({"role": "user", "content": [_image(url)]})
    return messages


def prm_messages(
    instruction: str,
    prior_actions: Sequence[str],
    before_image: str,
    response_text: str,
    after_image: str,
    *,
    parse_error: str | None = None,
) -> list[Message]:
    """The reward model's two-image context for judging one step.

    `parse_error`, when the step's response did not parse, is stated next to the
    response so the judge knows nothing was executed (the step is still judged).
    """
    response = prompts.PRM_RESPONSE.format(response=response_text)
    if parse_error:
        response += "\n" + prompts.PRM_PARSE_ERROR.format(error=parse_error)
    context = prompts.PRM_CONTEXT.format(instruction=instruction, history=_numbered(prior_actions))
    content = [
        _text(context),
        _text(prompts.PRM_BEFORE),
        _image(before_image),
        _text(response),
        _text(prompts.PRM_AFTER),
        _image(after_image),
        _text(prompts.PRM_QUESTION),
    ]
    return [
        {"role": "system", "content": prompts.PRM_SYSTEM},
        {"role": "user", "content": content},
    ]


def boxed_answer(text: str) -> str | None:
    """Content of the last \\boxed{...} in `text` (without nested braces), or None."""
    if not isinstance(text, str):
        return None
    found = _BOXED.findall(text)
    return found[-1].strip() if found else None


def parse_prm_vote(text: str) -> Literal[-1, 0, 1]:
    """1 or -1 from the last \\boxed{...} of a reward-model answer; 0 for anything else."""
    answer = boxed_answer(text)
    if answer is None:
        return 0
    return _VOTES.get(answer.replace(" ", ""), 0)


def critique_step_messages(
    instruction: str, step_index: int, response_text: str, reasonings: Sequence[str]
) -> list[Message]:
    """Ask for a <= 2 sentence summary (in \\boxed{}) of why a flagged step was bad,
    from the reward model's reasoning texts (Algorithm 2 of RLAnything)."""
    joined = "\n---\n".join(r.strip() for r in reasonings) or prompts.NO_HISTORY
    text = prompts.CRITIQUE_STEP.format(
        instruction=instruction, step=step_index + 1, response=response_text, reasonings=joined
    )
    return [{"role": "user", "content": text}]


def critique_trajectory_messages(
    instruction: str, step_summaries: Sequence[str], outcome: int | None
) -> list[Message]:
    """Ask for a <= 2 sentence summary (in \\boxed{}) of a whole attempt."""
    summaries = "\n".join(f"- {s}" for s in step_summaries) or prompts.NO_HISTORY
    text = prompts.CRITIQUE_TRAJECTORY.format(
        instruction=instruction,
        summaries=summaries,
        outcome=prompts.OUTCOME_TEXT.get(outcome, prompts.OUTCOME_TEXT[None]),
    )
    return [{"role": "user", "content": text}]


def rewrite_messages(
    current_instruction: str,
    template: Mapping[str, str],
    summaries: Sequence[str],
    direction: Literal["harder", "easier"],
) -> list[Message]:
    """Ask the rewriter for `{"<evaluator name>": "<instruction>"}` (exactly one key)."""
    if direction not in prompts.REWRITE_GUIDANCE:
        raise ValueError(f"direction must be 'harder' or 'easier', got {direction!r}")
    if not template:
        raise ValueError("rewrite needs a non-empty template")
    text = prompts.REWRITE.format(
        problem=prompts.REWRITE_PROBLEM[direction],
        direction=direction,
        instruction=current_instruction,
        template=json.dumps(dict(template), indent=2, ensure_ascii=False),
        summaries="\n".join(f"- {s}" for s in summaries) or prompts.NO_HISTORY,
        guidance=prompts.REWRITE_GUIDANCE[direction],
    )
    return [{"role": "user", "content": text}]


def parse_rewrite(text: str, names: Sequence[str]) -> tuple[str, str] | None:
    """(evaluator name, instruction) from a rewriter answer, None unless it is one JSON
    object (optionally fenced, after any thinking) with exactly one key from `names`
    and a non-empty string value."""
    if not isinstance(text, str):
        return None
    body = text.rsplit("</think>", 1)[-1].strip()
    fenced = re.search(r"```(?:json)?\s*(.*?)```", body, re.DOTALL)
    if fenced:
        body = fenced.group(1).strip()
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end < start:
        return None
    try:
        obj = json.loads(body[start : end + 1])
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict) or len(obj) != 1:
        return None
    ((name, instruction),) = obj.items()
    if name not in names or not isinstance(instruction, str) or not instruction.strip():
        return None
    return name, instruction.strip()
