"""Chat-message builders for the policy, the reward model, the critic and the rewriter.

All builders return OpenAI chat messages (images as `image_url` parts holding data
URLs) as vLLM and our hf engine accept them, and are pure functions of their
arguments, so the learner can rebuild exactly the prompt an actor sent. The texts
are in `prompts.py`, whose docstring states the structure of each call.

Policy context (docs/algorithms.md): the system prompt with the tool; for each of
the last `MAX_POLICY_IMAGES - 1` past steps a user turn holding only that step's
screenshot and an assistant turn holding the model's full response at that step;
then one user turn with the current screenshot first and the text: the request,
`Instruction: ...` and `Previous actions:` with one `Step k:` line for EVERY past
step. So at most `MAX_POLICY_IMAGES` screenshots, the current one last.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from difflib import SequenceMatcher
from typing import Any, Literal

from cua_rl.agent import prompts
from cua_rl.agent.tool_schema import CoordinateMode, system_prompt

Message = dict[str, Any]
MAX_POLICY_IMAGES = 3

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_VOTES: dict[str, Literal[-1, 1]] = {"1": 1, "+1": 1, "-1": -1}
_JSON = json.JSONDecoder()


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

    `history[i]` is the action text of previous step i (its "Action: ..." sentence);
    all of them are listed as `Step k:` lines. `screenshots` are data URLs, oldest
    first, the last one being the current screen, and align with the last steps
    (`len(screenshots) <= len(history) + 1`). `responses[i]` is the full response
    of step i, replayed as the assistant turn after that step's screenshot; without
    it the step's history line stands in. Only the last `max_images` screenshots
    are shown, so at most `max_images - 1` past steps are replayed as turns.
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
    messages: list[Message] = [
        {"role": "system", "content": system_prompt(screen, coords, image_size)}
    ]
    for offset, url in enumerate(shown[:-1]):
        step = first_shown_step + offset
        reply = responses[step] if responses is not None else _as_action_line(history[step])
        messages.append({"role": "user", "content": [_image(url)]})
        messages.append({"role": "assistant", "content": reply})
    request = prompts.POLICY_INSTRUCTION.format(instruction=instruction, history=_numbered(history))
    messages.append({"role": "user", "content": [_image(shown[-1]), _text(request)]})
    return messages


def _action_part(response: str) -> str:
    """What a response did, without its thinking: the text after the last `</think>`."""
    action = response.rsplit("</think>", 1)[-1].strip() if isinstance(response, str) else ""
    return action or "(empty response)"


def prm_messages(
    instruction: str,
    prior_actions: Sequence[str],
    before_image: str,
    response_text: str,
    after_image: str,
    *,
    parse_error: str | None = None,
) -> list[Message]:
    """The reward model's prompt for judging one step: one user turn, no system turn.

    In order: `Previous Actions:` (one `Step k:` line per step before the judged
    one, `prior_actions`), the screenshot before the step as the environment image
    and the step's action (its response without thinking) as the agent's action,
    the screenshot after the step as the current observation, and last the
    evaluator's instruction with the objective and the step's full response.
    `parse_error`, when the response did not parse, replaces the action and is
    stated next to the response so the judge knows nothing was executed (the step
    is still judged). Exactly two images: before, then after.
    """
    if parse_error:
        action = prompts.PRM_NOT_EXECUTED.format(error=parse_error)
        note = prompts.PRM_PARSE_NOTE.format(error=parse_error)
    else:
        action, note = _action_part(response_text), ""
    task = prompts.PRM_TASK.format(instruction=instruction, response=response_text, note=note)
    content = [
        _text(prompts.PRM_PREVIOUS.format(history=_numbered(prior_actions))),
        _text(prompts.PRM_BEFORE),
        _image(before_image),
        _text(prompts.PRM_ACTION.format(action=action)),
        _text(prompts.PRM_AFTER),
        _image(after_image),
        _text(task),
    ]
    return [{"role": "user", "content": content}]


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
    step_index: int, responses: Sequence[str], scores: Sequence[int]
) -> list[Message]:
    """Ask why a step was judged negative: <= 2 sentences naming the failure mode,
    answered only in \\boxed{}.

    The critic sees ALL the reward model's responses for the step, each with its
    extracted score (1, -1 or 0) beside it, so it can weigh the negative votes
    against the positive ones. `step_index` is 0-based (shown 1-based, as in the
    `Step k:` lines).
    """
    if len(responses) != len(scores):
        raise ValueError(f"{len(responses)} responses for {len(scores)} scores")
    if not responses:
        raise ValueError("critique_step_messages needs the step's votes")
    judgements = "\n\n".join(
        prompts.CRITIQUE_JUDGEMENT.format(number=i + 1, score=score, text=text.strip())
        for i, (text, score) in enumerate(zip(responses, scores, strict=True))
    )
    text = prompts.CRITIQUE_STEP.format(
        step=step_index + 1, count=len(responses), judgements=judgements
    )
    return [{"role": "user", "content": text}]


def critique_trajectory_messages(step_summaries: Sequence[str]) -> list[Message]:
    """Ask for the recurring failure modes of one trajectory, each named once, in
    <= 2 sentences; the model reasons first and answers in \\boxed{}."""
    summaries = json.dumps(list(step_summaries), indent=1, ensure_ascii=False)
    return [{"role": "user", "content": prompts.CRITIQUE_TRAJECTORY.format(summaries=summaries)}]


def _current_evaluator(instruction: str, template: Mapping[str, str]) -> str:
    """The template key a variant's instruction most likely comes from, for callers
    that do not pass `evaluator`: the exact canonical instruction, else the longest
    canonical instruction it contains (a hinted variant), else the most similar one
    (a model-written variant). A guess: callers that know the name should pass it."""
    for name, canonical in template.items():
        if canonical == instruction:
            return name
    contained = [name for name, canonical in template.items() if canonical in instruction]
    if contained:
        return max(contained, key=lambda name: len(template[name]))
    return max(
        template,
        key=lambda name: SequenceMatcher(None, template[name], instruction, autojunk=False).ratio(),
    )


def dedupe(items: Sequence[str]) -> list[str]:
    """`items` stripped, without empty or repeated ones, in first-seen order."""
    seen: dict[str, None] = {}
    for item in items:
        if isinstance(item, str) and item.strip():
            seen.setdefault(item.strip(), None)
    return list(seen)


def rewrite_messages(
    current_instruction: str,
    template: Mapping[str, str],
    summaries: Sequence[str],
    direction: Literal["harder", "easier"],
    *,
    evaluator: str | None = None,
) -> list[Message]:
    """Ask the rewriter for `{"<evaluator name>": "<instruction>"}` (exactly one key).

    The current task is shown as the same one-key object, `{evaluator:
    current_instruction}`, next to the template (evaluator name -> canonical
    instruction) and the deduplicated trajectory summaries. `evaluator` is the
    current variant's evaluator name; when None it is inferred from the template.
    """
    if direction not in prompts.REWRITE_GUIDANCE:
        raise ValueError(f"direction must be 'harder' or 'easier', got {direction!r}")
    if not template:
        raise ValueError("rewrite needs a non-empty template")
    if evaluator is None:
        evaluator = _current_evaluator(current_instruction, template)
    elif evaluator not in template:
        raise ValueError(f"evaluator {evaluator!r} is not in the template {sorted(template)}")
    unique = dedupe(summaries)
    text = prompts.REWRITE.format(
        goal=direction,
        current=json.dumps({evaluator: current_instruction}, ensure_ascii=False),
        template=json.dumps(dict(template), indent=2, ensure_ascii=False),
        summaries="\n".join(f"- {s}" for s in unique) or prompts.NO_HISTORY,
        guidance=prompts.REWRITE_GUIDANCE[direction],
    )
    return [{"role": "user", "content": text}]


def _last_json_object(text: str) -> Any:
    """The last top-level JSON object in `text` (objects nested in it do not count)."""
    last, pos = None, 0
    while (start := text.find("{", pos)) >= 0:
        try:
            obj, end = _JSON.raw_decode(text, start)
        except (ValueError, RecursionError):
            pos = start + 1
            continue
        if isinstance(obj, dict):
            last = obj
        pos = end
    return last


def parse_rewrite(text: str, names: Sequence[str]) -> tuple[str, str] | None:
    """(evaluator name, instruction) from a rewriter answer, or None.

    The answer is read from the LAST JSON object after any thinking (fenced or
    not): the prompt asks for JSON only, and for the JSON last if anything else
    slips out, so an object quoted earlier in prose does not count. It must have
    exactly one key from `names` and a non-empty string value.
    """
    if not isinstance(text, str):
        return None
    obj = _last_json_object(text.rsplit("</think>", 1)[-1])
    if not isinstance(obj, dict) or len(obj) != 1:
        return None
    ((name, instruction),) = obj.items()
    if name not in names or not isinstance(instruction, str) or not instruction.strip():
        return None
    return name, instruction.strip()
