"""What the fake model server (tests_support/fake_model_server.py) answers.

An answer builder turns one chat request (its JSON body and its ordinal on the
server) into an `Answer`: the texts of its choices, whether they carry token ids and
logprobs, the fault that spoils it and the key the server counts it under. The
builders here are the ones tests need: one text for everything (`always`), a
reward model, critic and rewriter told apart by their prompts (`by_role`), a policy
that plays a script (`script`) and a judge with known votes per step (`votes`).
`render` shapes an answer like our hf engine does (same fields and headers), or
spoiled by one of `BAD_MODES`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web

TOOL_CALL = (
    '<tool_call>{"name": "computer_use", "arguments": {"action": "terminate", '
    '"status": "success"}}</tool_call>'
)


def tool_call(action: str, **arguments: Any) -> str:
    """A policy answer with one `computer_use` call (coordinates 0-1000, relative)."""
    call = {"name": "computer_use", "arguments": {"action": action, **arguments}}
    return f"<tool_call>{json.dumps(call)}</tool_call>"


def good_choice(index: int = 0, text: str = TOOL_CALL) -> dict[str, Any]:
    """A well-formed choice with token ids and their logprobs, as a policy's."""
    return {
        "index": index,
        "message": {"role": "assistant", "content": text},
        "finish_reason": "stop",
        "token_ids": [5, 6],
        "logprobs": {"content": [{"token": "a", "logprob": -0.5}, {"token": "b", "logprob": -1.5}]},
    }


def text_choice(index: int, text: str) -> dict[str, Any]:
    """A choice with its text only, as a judge asking for no logprobs gets it."""
    return {
        "index": index,
        "message": {"role": "assistant", "content": text},
        "finish_reason": "stop",
    }


BAD_MODES: dict[str, str] = {
    "wrong_shape": "valid JSON, not a chat completion",
    "empty_choices": "choices: []",
    "bad_version": "x-model-version: 'latest'",
    "missing_logprob": "a logprobs entry without logprob",
    "missing_logprobs": "a choice without logprobs",
    "not_json": "an HTML page with status 200",
    "short_logprobs": "fewer logprobs than token ids",
}
"""Bad answer kinds with status 200 (what the client must turn into ModelResponseError)."""

OK = "ok"
"""The fault of an answer nothing spoils."""


@dataclass(frozen=True)
class Answer:
    """The answer to one chat request, before it is shaped into a response."""

    texts: tuple[str, ...]
    """One text per choice."""
    scored: bool = True
    """Choices carry token ids and logprobs (a policy's); False: text only (a judge's)."""
    fault: str = OK
    """A `BAD_MODES` kind that spoils this answer (it wins over the server's own fault)."""
    key: str = ""
    """What the server counts this answer under (`FakeModelServer.asked`)."""


AnswerFn = Callable[[dict[str, Any], int], Answer]
"""Builds the answer to a request from its body and its ordinal (0 for the first)."""


def choices_asked(body: dict[str, Any]) -> int:
    return int(body.get("n", 1))


def always(text: str = TOOL_CALL) -> AnswerFn:
    """Every choice of every request is `text` (a terminate call by default)."""

    def answer(body: dict[str, Any], _turn: int) -> Answer:
        return Answer((text,) * choices_asked(body))

    return answer


STEP_REASONING = "The agent typed into the wrong window. \\boxed{-1}"
STEP_SUMMARY = "\\boxed{The agent typed into the wrong window instead of the terminal.}"
TRAJ_SUMMARY = "\\boxed{The agent repeatedly targets the wrong window.}"

REWRITE_MARK = "You adapt the difficulty of a task"
TRAJECTORY_MARK = "JSON list of summaries"
STEP_MARK = "at least one judgement scored it as bad"
"""Phrases of the rewriter and critique prompts (cua_rl.agent.prompts) that tell the
roles apart; everything else is a reward-model request."""


def answer_for(messages: list[dict[str, Any]], names: list[str]) -> str:
    """The scripted text for a request's role: a rewrite of the first of `names`
    (template names), a trajectory or step critique, or a reward model's -1."""
    text = json.dumps(messages)
    if REWRITE_MARK in text:
        return json.dumps({names[0]: "Create the file hello.txt. Hint: open a terminal first."})
    if TRAJECTORY_MARK in text:
        return TRAJ_SUMMARY
    if STEP_MARK in text:
        return STEP_SUMMARY
    return STEP_REASONING


def by_role(template_names: list[str]) -> AnswerFn:
    """Meaningful reward-model, critic and rewriter answers (the tiny random model
    cannot write them), chosen by `answer_for` from the prompt."""

    def answer(body: dict[str, Any], _turn: int) -> Answer:
        text = answer_for(body["messages"], template_names)
        return Answer((text,) * choices_asked(body))

    return answer


def script(texts: Sequence[str]) -> AnswerFn:
    """A policy that answers its requests with `texts`, in order (the last one again
    once the script is used up): a scripted agent at the inference boundary."""
    planned = list(texts)

    def answer(body: dict[str, Any], turn: int) -> Answer:
        step = min(turn, len(planned) - 1)
        return Answer((planned[step],) * choices_asked(body), key=str(step))

    return answer


GARBAGE = "garbage"
"""In a `votes` plan: a vote whose text has no \\boxed{} score."""
NOT_JSON = "not_json"
"""As a step's whole plan: the server answers that step with an HTML page (status 200)."""


def vote_text(vote: int | str) -> str:
    if vote == GARBAGE:
        return "I cannot tell from these screens."
    return f"The step {'helps' if vote == 1 else 'hurts'} the task. \\boxed{{{vote}}}"


def votes(
    plan: Mapping[str, Sequence[int | str] | str], default: Sequence[int | str] = ()
) -> AnswerFn:
    """A reward model (or labelling judge) with known votes per step, text only.

    `plan` maps a marker that occurs in exactly one step's response (so in that step's
    reward-model prompt only: the full response is not part of later steps' history)
    to the votes of its choices, `GARBAGE` for an unreadable one, or to `NOT_JSON` for
    a broken answer. A prompt with no marker gets `default` votes. Each answer is
    counted under its marker ("" for none)."""

    def answer(body: dict[str, Any], _turn: int) -> Answer:
        text = json.dumps(body["messages"])
        marker = next((m for m in plan if m in text), None)
        planned = plan[marker] if marker else list(default)
        if planned == NOT_JSON:
            return Answer((), scored=False, fault="not_json", key=marker or "")
        picked = [
            planned[i % len(planned)] if planned else GARBAGE for i in range(choices_asked(body))
        ]
        return Answer(tuple(vote_text(v) for v in picked), scored=False, key=marker or "")

    return answer


def render(answer: Answer, version: int, fault: str = OK) -> web.Response:
    """The HTTP response for `answer` from weights `version`, spoiled by `fault`."""
    headers = {"x-model-version": str(version)}
    if fault == "not_json":
        return web.Response(text="<html>502 Bad Gateway</html>", headers=headers)
    if fault == "wrong_shape":
        return web.json_response({"result": "ok", "choices": "none"}, headers=headers)
    if fault == "empty_choices":
        return web.json_response({"choices": []}, headers=headers)
    if fault == "bad_version":
        headers["x-model-version"] = "latest"
    body: dict[str, Any] = {"id": "fake", "object": "chat.completion"}
    if answer.scored:
        body["choices"] = [good_choice(i, text) for i, text in enumerate(answer.texts)]
        body["prompt_token_ids"] = [1]
    else:
        body["choices"] = [text_choice(i, text) for i, text in enumerate(answer.texts)]
    first = body["choices"][0] if body["choices"] else {}
    if fault == "missing_logprob":
        del first["logprobs"]["content"][1]["logprob"]
    elif fault == "missing_logprobs":
        first.pop("logprobs", None)
    elif fault == "short_logprobs":
        first["logprobs"]["content"].pop()
    elif fault not in (OK, "bad_version"):
        raise ValueError(f"unknown fault {fault!r}: expected {OK!r} or one of {sorted(BAD_MODES)}")
    return web.json_response(body, headers=headers)
