"""Synthetic conversations that teach the tiny model the answer formats, not the tasks.

Every prompt is built by the real builders of `cua_rl.agent.messages`, so the
priming sees exactly the prompts actors, the judge, the critic and the rewriter
send. Every target is well-formed and random: random actions and coordinates for
the policy, a coin-flip \\boxed{1} / \\boxed{-1} for the reward model. The primed
model therefore produces parseable but uninformed outputs, which is what the
quickstart needs to exercise real learning signals (rewards, PRM advantages)
without pretending the tiny model can do anything.

Invariant: `generate_examples(n, seed)` is a pure function of its arguments.
Pure Python plus PIL: no torch here.
"""

from __future__ import annotations

import io
import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from cua_rl.agent import prompts
from cua_rl.agent.images import encode_image
from cua_rl.agent.messages import (
    critique_step_messages,
    critique_trajectory_messages,
    policy_messages,
    prm_messages,
    rewrite_messages,
)
from cua_rl.agent.parse import action_sentence

ExampleKind = Literal["policy", "prm", "critique", "rewrite"]

# (kind, weight): the policy and the reward model carry the learning signal of a run.
MIX: tuple[tuple[ExampleKind, float], ...] = (
    ("policy", 0.5), ("prm", 0.3), ("critique", 0.12), ("rewrite", 0.08),
)  # fmt: skip
SCREENS: tuple[tuple[int, int], ...] = ((1920, 1080), (1280, 720), (1024, 768))

_INSTRUCTIONS = (
    "Move all .txt files from the Desktop into the folder named notes.",
    "Count the lines that contain ERROR in log.txt and write the number to count.txt.",
    "Open the spreadsheet and sort the first column in ascending order.",
    "Rename the file report.docx to final.docx.",
    "Set the page orientation of the document to landscape.",
    "Change the desktop background color to blue.",
    "Create a folder named backup in the home directory.",
    "Open the browser and search for the weather in Paris.",
    "Make the title of the slide bold.",
    "Delete the empty rows from the sheet.",
)
_ELEMENTS = (
    "File menu", "OK button", "search box", "Save icon", "terminal", "address bar",
    "first cell", "folder icon", "Edit menu", "close button", "text field", "toolbar",
    "Format menu", "scroll bar", "dialog", "title", "sidebar", "tab",
)  # fmt: skip
_WORDS = (
    "hello", "notes", "report", "backup", "final", "count", "ERROR", "Paris", "data",
    "todo", "42", "log.txt", "blue", "landscape", "done", "test",
)  # fmt: skip
_KEYS = (
    ["enter"], ["ctrl", "s"], ["ctrl", "c"], ["ctrl", "v"], ["tab"], ["esc"],
    ["ctrl", "a"], ["alt", "f4"], ["backspace"], ["delete"], ["down"], ["up"],
)  # fmt: skip
_CLICKS = {
    "left_click": "Click", "double_click": "Double click", "right_click": "Right click",
}  # fmt: skip
_REASONS = (
    "I compare the screenshots before and after the step.",
    "The screen changed after the action.",
    "The action does not match the task.",
)
_VERBS = ("clicked", "typed into", "moved to", "scrolled past", "pressed a key on", "opened")
_SUMMARIES = (
    "The agent clicked the wrong element.", "The agent typed text in the wrong field.",
    "The agent stopped before the task was done.", "The agent repeated the same action.",
    "The agent never opened the right application.", "The agent ignored the open dialog.",
    "The agent scrolled away from the target.", "The agent pressed the wrong shortcut.",
)  # fmt: skip
_REWRITES = {"harder": "Do the task.", "easier": "Do the task step by step."}
_EVALUATORS = (
    "check_files_moved", "check_line_count", "compare_table", "check_file_name",
    "check_page_setup", "check_background", "check_folder_exists", "check_bold_title",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class PrimingExample:
    """One chat prompt (OpenAI messages, images as data URLs) and several target answers.

    Several answers per prompt let the warm-up pay for a long prompt once and
    show the model directly that the answer is a distribution, not one string.
    """

    kind: ExampleKind
    messages: list[dict[str, Any]]
    responses: tuple[str, ...]


def screenshot_urls(rng: random.Random, count: int, min_pixels: int) -> list[str]:
    """Small synthetic screenshots (a colored desktop with a window), as data URLs.

    `min_pixels` sets how many image tokens each costs after `encode_image`; the
    content is irrelevant (targets ignore it), only the token layout matters.
    """
    from PIL import Image, ImageDraw

    urls = []
    for _ in range(count):
        w, h = rng.choice(((64, 36), (48, 36), (64, 48)))
        image = Image.new("RGB", (w, h), tuple(rng.randrange(256) for _ in range(3)))
        x, y = rng.randrange(w // 2), rng.randrange(h // 2)
        fill = tuple(rng.randrange(256) for _ in range(3))
        ImageDraw.Draw(image).rectangle((x, y, x + w // 3, y + h // 3), fill=fill)
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
        urls.append(encode_image(buffer.getvalue(), min_pixels=min_pixels, max_pixels=min_pixels))
    return urls


def policy_response(rng: random.Random) -> str:
    """`Action: <sentence>` then one computer_use tool call with random arguments.

    The sentence is fixed per action kind: a 2-layer model learns a rigid
    template far faster than free composition, and the randomness that matters
    (action kind, coordinates, text, keys) stays in the call.
    """
    roll = rng.random()
    point = [rng.randint(0, 1000), rng.randint(0, 1000)]
    args: dict[str, Any]
    if roll < 0.35:
        kind = rng.choice(list(_CLICKS))
        sentence, args = f"{_CLICKS[kind]} the target.", {"action": kind, "coordinate": point}
    elif roll < 0.47:
        sentence, args = "Move the mouse.", {"action": "mouse_move", "coordinate": point}
    elif roll < 0.62:
        sentence, args = "Type the text.", {"action": "type", "text": rng.choice(_WORDS)}
    elif roll < 0.76:
        sentence, args = "Press the keys.", {"action": "key", "keys": rng.choice(_KEYS)}
    elif roll < 0.9:
        pixels = rng.choice((-1, 1)) * rng.randint(1, 9)
        sentence, args = "Scroll the page.", {"action": "scroll", "pixels": pixels}
    else:
        status = rng.choice(("success", "failure"))
        sentence, args = "Finish the task.", {"action": "terminate", "status": status}
    call = json.dumps({"name": "computer_use", "arguments": args})
    return f"Action: {sentence}\n<tool_call>\n{call}\n</tool_call>"


def _garbage(rng: random.Random) -> str:
    """An unparseable earlier response, as an unprimed or exploring policy writes them."""
    return " ".join(rng.choice(_WORDS + _ELEMENTS) for _ in range(rng.randint(1, 6)))


def _policy(rng: random.Random, min_pixels: int, k: int) -> PrimingExample:
    steps = rng.choice((0, 0, 1, 2, 3, 4))
    responses = [
        _garbage(rng) if rng.random() < 0.2 else policy_response(rng) for _ in range(steps)
    ]
    history = [_history_line(r) for r in responses]
    shots = rng.randint(1, min(3, steps + 1))
    screen = rng.choice(SCREENS)
    messages = policy_messages(
        rng.choice(_INSTRUCTIONS), history, screenshot_urls(rng, shots, min_pixels), screen,
        responses=responses,
    )  # fmt: skip
    return PrimingExample("policy", messages, tuple(policy_response(rng) for _ in range(k)))


def _history_line(response: str) -> str:
    """A history line as agent.context.history_line writes one, from a response alone
    (the priming data has no `Step`)."""
    return action_sentence(response) or prompts.NO_OP_ACTION


def _prm(rng: random.Random, min_pixels: int, k: int) -> PrimingExample:
    prior = [_history_line(policy_response(rng)) for _ in range(rng.randint(0, 3))]
    broken = rng.random() < 0.25
    response = _garbage(rng) if broken else policy_response(rng)
    before, after = screenshot_urls(rng, 2, min_pixels)
    messages = prm_messages(
        rng.choice(_INSTRUCTIONS), prior, before, response, after,
        parse_error="no <tool_call> block after the thinking" if broken else None,
    )  # fmt: skip
    return PrimingExample("prm", messages, tuple(_judgement(rng) for _ in range(k)))


def _judgement(rng: random.Random) -> str:
    """One fixed reasoning sentence, then a fair coin as the vote (the judge knows nothing)."""
    return f"{rng.choice(_REASONS)} \\boxed{{{rng.choice(('1', '-1'))}}}"


def _critique(rng: random.Random, _min_pixels: int, k: int) -> PrimingExample:
    """Step stage (m = 3 votes, at least one -1; answer only in \\boxed{}) or
    trajectory stage (a JSON list of step summaries; a reason, then \\boxed{})."""
    if rng.random() < 0.6:
        scores = [-1, *(rng.choice((1, -1, 0)) for _ in range(2))]
        rng.shuffle(scores)
        votes = [
            f"The agent {rng.choice(_VERBS)} the {rng.choice(_ELEMENTS)}. \\boxed{{{s}}}"
            if s else f"The agent {rng.choice(_VERBS)} the {rng.choice(_ELEMENTS)}."
            for s in scores
        ]  # fmt: skip
        messages = critique_step_messages(rng.randint(0, 14), votes, scores)
        answers = tuple(f"\\boxed{{{rng.choice(_SUMMARIES[:4])}}}" for _ in range(k))
    else:
        messages = critique_trajectory_messages(rng.sample(_SUMMARIES, rng.randint(1, 3)))
        answers = tuple(
            f"{rng.choice(_REASONS)} \\boxed{{{rng.choice(_SUMMARIES[:4])}}}" for _ in range(k)
        )
    return PrimingExample("critique", messages, answers)


def _rewrite(rng: random.Random, _min_pixels: int, k: int) -> PrimingExample:
    names = rng.sample(_EVALUATORS, rng.randint(1, 3))
    template = {name: rng.choice(_INSTRUCTIONS) for name in names}
    summaries = rng.sample(_SUMMARIES, rng.randint(0, 2))
    direction = rng.choice(("harder", "easier"))
    current = rng.choice(names)
    messages = rewrite_messages(
        template[current], template, summaries, direction, evaluator=current
    )
    answers = []
    for _ in range(k):
        name = rng.choice(names)
        answers.append(json.dumps({name: _REWRITES[direction]}))
    return PrimingExample("rewrite", messages, tuple(answers))


_BUILDERS: dict[ExampleKind, Callable[[random.Random, int, int], PrimingExample]] = {
    "policy": _policy, "prm": _prm, "critique": _critique, "rewrite": _rewrite,
}  # fmt: skip


IMAGE_PIXELS: tuple[tuple[int, float], ...] = (
    (16 * 32 * 32, 0.5), (64 * 32 * 32, 0.3), (256 * 32 * 32, 0.2),
)  # fmt: skip
"""(pixels, weight): image sizes of 16, 64 and 256 tokens. Mostly small to train
fast, but real screenshots reach the processor's 256-token cap, and a model primed
only on small images measured far worse on those."""


def generate_examples(count: int, seed: int, answers: int = 8) -> list[PrimingExample]:
    """`count` prompts of mixed kinds (weights in MIX) with `answers` targets each,
    reproducible from `seed`."""
    rng = random.Random(seed)
    kinds = [kind for kind, _ in MIX]
    weights = [weight for _, weight in MIX]
    sizes = [pixels for pixels, _ in IMAGE_PIXELS]
    size_weights = [weight for _, weight in IMAGE_PIXELS]
    examples = []
    for _ in range(count):
        kind = rng.choices(kinds, weights)[0]
        pixels = rng.choices(sizes, size_weights)[0]
        examples.append(_BUILDERS[kind](rng, pixels, answers))
    return examples
