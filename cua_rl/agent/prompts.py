"""Prompt texts of the policy, the reward model, the critic and the rewriter.

Every text a model role reads lives here, apart from the builders in
`messages.py`, so that a prompt change is one reviewable diff and the builders stay
about structure. The wording is ours; the structure and constraints follow the
RLAnything method for the GUI setting, since its released checkpoints and results
depend on them:

- policy: a system turn with Qwen's `# Tools` block (the tool schema inside
  `<tools>`, the `<tool_call>` convention; the released Qwen3-VL checkpoints were
  tuned on it) and a response format of one imperative "Action: ..." sentence
  then exactly ONE `<tool_call>`, finishing with action=terminate; then for each
  of the (at most 2) retained past steps a user turn with only its screenshot and
  an assistant turn with its full response; then a user turn with the current
  screenshot first and the request, `Instruction: ...` and `Previous actions:`
  (a `Step k:` line for EVERY past step, or `None`);
- reward model: one user turn, no system turn: `Previous Actions:`, the screenshot
  before the judged step as the environment image, the step's action, the
  screenshot after it as the current observation, and last the strict-evaluator
  instruction with the objective and the step's full response, weighing the
  step's effect on the final outcome; reasoning, then \\boxed{1} or \\boxed{-1};
- critique, step stage (steps with a -1 vote): all m reward-model responses with
  their extracted scores; at most 2 sentences naming the failure mode, only in
  \\boxed{}; trajectory stage: the JSON list of the step summaries; at most 2
  sentences of recurring failure modes, each once; reasoning, then \\boxed{};
- rewriter: the goal (easier/harder), the current task as a one-key JSON object
  (evaluator name -> instruction), the template (evaluator name -> canonical
  instruction) and the deduplicated summaries; it answers one JSON object with
  exactly one key, last if anything else slips out.
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

Answer every step in exactly this form:
1) Action: one short imperative sentence saying what to do next in the UI.
2) Exactly one <tool_call>...</tool_call> block holding only the JSON \
{"name": <function-name>, "arguments": <args-json-object>}.

Rules:
- Write the Action line first, then the single <tool_call> block.
- Keep the Action to one sentence.
- Write nothing else: no second tool call and no text after the block.
- To finish the task (done or impossible), call the tool with action=terminate."""

POLICY_INSTRUCTION = """\
Decide the next move from the screenshot, the instruction and the actions taken \
so far.

Instruction: {instruction}

Previous actions:
{history}"""

NO_HISTORY = "None"
NO_OP_ACTION = "(the response could not be parsed; nothing was done)"
"""How a step whose response did not parse appears in later `Step k:` lines."""
NO_ACTION_SENTENCE = "(no Action sentence)"
"""How a parsed step without an "Action: ..." sentence appears in `Step k:` lines."""

PRM_PREVIOUS = """\
Previous Actions:
{history}"""
PRM_BEFORE = "Environment image (the screen before the agent's most recent step):"
PRM_ACTION = "Agent action: {action}"
PRM_NOT_EXECUTED = "nothing was executed, the response could not be parsed ({error})"
PRM_AFTER = "Current observation (the screen after that step):"
PRM_TASK = """\
You are a strict evaluator of the most recent step of a computer-use agent.

The agent's objective: {instruction}

The agent's full response at its most recent step (reasoning and action):
{response}
{note}
Judge this step: is it correct and useful given the objective, the previous \
actions and what the screen shows before and after it, and how is it likely to \
affect the final outcome of the task? Be strict: a step that makes no progress, \
acts on the wrong element, or stops before the task is done is a bad step.

First give your reasoning, then your final score: \\boxed{{1}} for a good step or \
\\boxed{{-1}} for a bad step."""
PRM_PARSE_NOTE = "\nThis response could not be executed ({error}); the screen did not change \
because of it.\n"

CRITIQUE_STEP = """\
A reward model judged step {step} of a computer-use agent's attempt {count} times, \
and at least one judgement scored it as bad. Here are all the judgements of this \
step, each with the score extracted from it (1 good, -1 bad, 0 no readable score):

{judgements}

Write one dense summary, at most 2 sentences, of why the step was judged \
negative, naming its failure mode (for example a wrong assumption, a misread UI, \
an action inconsistent with the instruction, a hallucinated value, a skipped \
constraint). Answer only with the summary inside \\boxed{{...}}."""
CRITIQUE_JUDGEMENT = "Judgement {number} (score {score}):\n{text}"

CRITIQUE_TRAJECTORY = """\
Here is the JSON list of summaries of the steps of one computer-use agent \
attempt that a reward model judged negative:

{summaries}

Write one summary, at most 2 sentences, of the failure modes that recur in this \
attempt, naming each failure mode once (do not repeat it per step). Reason \
first, then give the final summary inside \\boxed{{...}}."""

REWRITE = """\
You adapt the difficulty of a task given to a computer-use agent.

Goal: {goal} (make the task {goal} for the agent)

Current task (evaluator name -> instruction):
{current}

Template of this task (evaluator name -> canonical instruction; each evaluator \
checks the outcome its own instruction asks for):
{template}

Recurring failure modes seen in the agent's previous attempts:
{summaries}

Rules:
- Keep the current evaluator, or switch to another evaluator of the template by \
changing the key; use only evaluator names that appear in the template.
- {guidance}
- Keep the instruction short.
- Keep the essential task of the chosen evaluator's canonical instruction; never \
invent a new task or an evaluator name.

Output valid JSON only: one object with exactly one key, the evaluator name, whose \
value is the new instruction, e.g. {{"<evaluator name>": "<instruction>"}}. If any \
other text slips out, the JSON object must come last."""

REWRITE_GUIDANCE = {
    "easier": "To make it easier, add short hints targeted at the failure modes above "
    "(where to click, which menu or shortcut to use).",
    "harder": "To make it harder, remove hints, or make the instruction more ambiguous.",
}
