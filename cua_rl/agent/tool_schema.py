"""The `computer_use` tool of Qwen3-VL agents and the policy system prompt.

The schema mirrors Qwen's computer-use cookbook / Qwen-Agent `ComputerUse` tool
(function `computer_use`, one `action` enum plus keys, text, coordinate, pixels,
time, status) so that released Qwen3-VL checkpoints act without adaptation. The
tool is rendered into the system prompt in Qwen's `<tools>` block ourselves
rather than passed as the OpenAI `tools=` field: the exact prompt text is then
part of every stored sample and identical across inference engines, and callers
must therefore not also send `tools=`.

The description states the coordinate space the model answers in: 1000x1000 for
relative coordinates (Qwen3-VL's 0..1000 grid on both axes, the default) or the
resized screenshot's pixel size for absolute coordinates.
"""

from __future__ import annotations

import functools
import json
from typing import Any, Literal, get_args

from cua_rl.agent import prompts
from cua_rl.types import ActionKind

CoordinateMode = Literal["relative", "absolute"]

TOOL_NAME = "computer_use"
ACTIONS: tuple[str, ...] = get_args(ActionKind)
RELATIVE_GRID = 1000
"""Qwen3-VL relative coordinates run 0..1000 on both axes."""


def coordinate_space(
    screen: tuple[int, int],
    coords: CoordinateMode = "relative",
    image_size: tuple[int, int] | None = None,
) -> tuple[int, int]:
    """(width, height) of the space the model's coordinates live in.

    Relative: the 1000x1000 grid. Absolute: the pixels of the image the model saw
    (`image_size`, after smart resize), or the screen when the image was not resized.
    """
    if coords == "relative":
        return (RELATIVE_GRID, RELATIVE_GRID)
    if coords != "absolute":
        raise ValueError(f"coords must be 'relative' or 'absolute', got {coords!r}")
    return image_size if image_size is not None else screen


def computer_use_tool(display_size: tuple[int, int]) -> dict[str, Any]:
    """The tool in OpenAI function format, stating `display_size` as the resolution."""
    width, height = display_size
    args = prompts.ARGUMENT_DESCRIPTIONS
    return {
        "type": "function",
        "function": {
            "name": TOOL_NAME,
            "description": prompts.TOOL_DESCRIPTION.format(width=width, height=height),
            "parameters": {
                "type": "object",
                "properties": {
                    "action": {
                        "description": prompts.ACTION_DESCRIPTION,
                        "enum": list(ACTIONS),
                        "type": "string",
                    },
                    "keys": {"description": args["keys"], "type": "array"},
                    "text": {"description": args["text"], "type": "string"},
                    "coordinate": {"description": args["coordinate"], "type": "array"},
                    "pixels": {"description": args["pixels"], "type": "number"},
                    "time": {"description": args["time"], "type": "number"},
                    "status": {
                        "description": args["status"],
                        "type": "string",
                        "enum": ["success", "failure"],
                    },
                },
                "required": ["action"],
            },
        },
    }


@functools.lru_cache(maxsize=64)
def system_prompt(
    screen: tuple[int, int],
    coords: CoordinateMode = "relative",
    image_size: tuple[int, int] | None = None,
) -> str:
    """The policy's system message: Qwen's `<tools>` block plus the response format.

    Cached: it depends only on its arguments and every step of every episode asks."""
    tool = computer_use_tool(coordinate_space(screen, coords, image_size))
    tools_block = prompts.TOOLS_PREAMBLE.format(tools=json.dumps(tool, ensure_ascii=False))
    return f"{tools_block}\n\n{prompts.RESPONSE_FORMAT}"
