"""Prompt texts of the policy, the reward model, the critic and the rewriter.

Kept apart from the builders so that a prompt change is one reviewable diff and
the builders stay about structure. The policy texts follow the Qwen3-VL
computer-use cookbook and OSWorld's Qwen3-VL agent (tool description, Qwen's
`<tools>` system block, "Action: ..." then `<tool_call>`), because the released
checkpoints were tuned on that format; the reward-model texts follow the
RLAnything paper (reason, then \\boxed{1} or \\boxed{-1}).
"""

from __future__ import annotations

TOOL_DESCRIPTION = """\
Use a mouse and keyboard to interact with a computer, and take screenshots.
* This is an interface to a desktop GUI. You do not have access to a terminal or \
applications menu. You must click on desktop icons to start applications.
* Some applications may take time to start or process actions, so you may need to \
wait and take successive screenshots to see the results of your actions. E.g. if you \
click on Firefox and a window doesn't open, try wait and taking another screenshot.
* The screen's resolution is {width}x{height}.
* Whenever you intend to move the cursor to click on an element like an icon, you \
should consult a screenshot to determine the coordinates of the element before moving \
the cursor.
* If you tried clicking on a program or link but it failed to load even after waiting, \
try adjusting your cursor position so that the tip of the cursor visually falls on the \
element that you want to click.
* Make sure to click any buttons, links, icons, etc with the cursor tip in the center \
of the element. Don't click boxes on their edges unless asked."""

ACTION_DESCRIPTION = """\
The action to perform. The available actions are:
* `key`: Performs key down presses on the arguments passed in order, then performs \
key releases in reverse order.
* `type`: Type a string of text on the keyboard.
* `mouse_move`: Move the cursor to a specified (x, y) pixel coordinate on the screen.
* `left_click`: Click the left mouse button at a specified (x, y) pixel coordinate on \
the screen.
* `left_click_drag`: Click and drag the cursor to a specified (x, y) pixel coordinate \
on the screen.
* `right_click`: Click the right mouse button at a specified (x, y) pixel coordinate \
on the screen.
* `middle_click`: Click the middle mouse button at a specified (x, y) pixel coordinate \
on the screen.
* `double_click`: Double-click the left mouse button at a specified (x, y) pixel \
coordinate on the screen.
* `triple_click`: Triple-click the left mouse button at a specified (x, y) pixel \
coordinate on the screen.
* `scroll`: Performs a scroll of the mouse scroll wheel.
* `hscroll`: Performs a horizontal scroll of the mouse scroll wheel.
* `wait`: Wait specified seconds for the change to happen.
* `terminate`: Terminate the current task and report its completion status."""

ARGUMENT_DESCRIPTIONS = {
    "keys": "Required only by `action=key`.",
    "text": "Required only by `action=type`.",
    "coordinate": "(x, y): The x (pixels from the left edge) and y (pixels from the top "
    "edge) coordinates to move the mouse to. Required by `action=mouse_move` and "
    "`action=left_click_drag`.",
    "pixels": "The amount of scrolling to perform. Positive values scroll up (or right "
    "for hscroll), negative values scroll down (or left). Required only by "
    "`action=scroll` and `action=hscroll`.",
    "time": "The seconds to wait. Required only by `action=wait`.",
    "status": "The status of the task. Required only by `action=terminate`.",
}

TOOLS_PREAMBLE = """\
# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{tools}
</tools>

For each function call, return a json object with function name and arguments within \
<tool_call></tool_call> XML tags:
<tool_call>
{{"name": <function-name>, "arguments": <args-json-object>}}
</tool_call>"""

RESPONSE_FORMAT = """\
# Response format

Response format for every step:
1) Action: a short imperative describing what to do in the UI.
2) One or more <tool_call>...</tool_call> blocks, each containing only the JSON: \
{"name": <function-name>, "arguments": <args-json-object>}. Several blocks run in order.

Rules:
- Output exactly in the order: Action, <tool_call>.
- Be brief: one sentence for Action.
- Do not output anything else outside those parts.
- If finishing, use action=terminate in the tool call."""

POLICY_INSTRUCTION = """\
Please generate the next move according to the UI screenshot, instruction and \
previous actions.

Instruction: {instruction}

Previous actions:
{history}"""

NO_HISTORY = "None"

PRM_SYSTEM = """\
You are an expert judge of computer-use agents. An agent is operating a desktop \
computer to complete a task. You see the screenshot before one of its steps, the \
agent's response at that step, and the screenshot after the step was executed. \
Judge whether this step is a good step: correct, useful progress towards completing \
the task (or a correct decision to finish), given what happened before. Think step \
by step about what the agent intended, what actually changed on the screen, and \
whether it brings the task closer to completion. Then answer \\boxed{1} for a good \
step or \\boxed{-1} for a bad step, as the last thing you write."""

PRM_CONTEXT = """\
Task: {instruction}

Actions the agent took before this step:
{history}"""

PRM_BEFORE = "Screenshot before the step:"
PRM_RESPONSE = "The agent's response at this step:\n{response}"
PRM_PARSE_ERROR = "This response could not be executed ({error}); nothing was done."
PRM_AFTER = "Screenshot after the step:"
PRM_QUESTION = (
    "Is this step a good step towards completing the task? Reason, then answer "
    "\\boxed{1} (good) or \\boxed{-1} (bad)."
)

CRITIQUE_STEP = """\
An agent operating a desktop computer took a step that a reviewer flagged as bad.

Task: {instruction}

Step {step}: the agent's response was:
{response}

The reviewer's reasoning:
{reasonings}

Summarize in at most 2 sentences what went wrong at this step and why. Put the \
summary inside \\boxed{{...}}."""

CRITIQUE_TRAJECTORY = """\
An agent operating a desktop computer attempted a task; it {outcome}.

Task: {instruction}

Summaries of the steps a reviewer flagged as bad:
{summaries}

Summarize in at most 2 sentences the main reasons the agent struggled with this \
task. Put the summary inside \\boxed{{...}}."""

OUTCOME_TEXT = {1: "succeeded", -1: "failed", None: "did not finish"}

REWRITE = """\
We train a computer-use agent on the task below. The task is currently too \
{problem} for the agent, so write a {direction} version of it.

Current instruction: {instruction}

The task can be checked by one of these evaluators; each key is an evaluator name \
and its value the canonical instruction that evaluator checks:
{template}

What reviewers observed in the agent's recent attempts:
{summaries}

Pick exactly one evaluator name from the list above and write the instruction the \
agent will be given. {guidance} The instruction must ask for exactly what the \
chosen evaluator checks.

Answer with a JSON object with exactly one key, the evaluator name, whose value is \
the new instruction, e.g. {{"<evaluator name>": "<instruction>"}}. Output only the JSON."""

REWRITE_GUIDANCE = {
    "harder": "To make it harder, remove hints and intermediate steps, or pick an "
    "evaluator with a more demanding goal.",
    "easier": "To make it easier, add hints (where to click, which menu, which "
    "shortcut) drawn from the observations, or pick an evaluator with a simpler goal.",
}
REWRITE_PROBLEM = {"harder": "easy", "easier": "hard"}
