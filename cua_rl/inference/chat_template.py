# ruff: noqa: E501 - a Jinja template reads best with its long lines intact
"""The Qwen3-VL (Instruct) chat template, shipped with the tiny model.

Kept byte-compatible in structure with the template of the released Qwen3-VL
checkpoints (ChatML turns, `# Tools` system block, `<tool_call>` JSON, one
`<|vision_start|><|image_pad|><|vision_end|>` per image part, tool responses
folded into a user turn) so prompts built for the tiny model have the same
shape as for real weights. Image parts may be `{"type": "image"}` (HF style) or
`{"type": "image_url"}` (OpenAI style): the server renders OpenAI messages with
this template and hands the decoded images to the processor in order.
"""

from __future__ import annotations

QWEN3_VL_CHAT_TEMPLATE = r"""
{%- macro render_content(content, do_vision_count) -%}
    {%- if content is string -%}
        {{- content -}}
    {%- else -%}
        {%- for item in content -%}
            {%- if item.type == 'image' or item.type == 'image_url' or 'image' in item or 'image_url' in item -%}
                {%- if do_vision_count -%}{%- set image_count.value = image_count.value + 1 -%}{%- endif -%}
                {%- if add_vision_id -%}{{- 'Picture ' ~ image_count.value ~ ': ' -}}{%- endif -%}
                {{- '<|vision_start|><|image_pad|><|vision_end|>' -}}
            {%- elif item.type == 'video' or 'video' in item -%}
                {%- if do_vision_count -%}{%- set video_count.value = video_count.value + 1 -%}{%- endif -%}
                {%- if add_vision_id -%}{{- 'Video ' ~ video_count.value ~ ': ' -}}{%- endif -%}
                {{- '<|vision_start|><|video_pad|><|vision_end|>' -}}
            {%- elif 'text' in item -%}
                {{- item.text -}}
            {%- endif -%}
        {%- endfor -%}
    {%- endif -%}
{%- endmacro -%}
{%- set image_count = namespace(value=0) -%}
{%- set video_count = namespace(value=0) -%}
{%- if tools -%}
    {{- '<|im_start|>system\n' -}}
    {%- if messages[0].role == 'system' -%}
        {{- render_content(messages[0].content, false) + '\n\n' -}}
    {%- endif -%}
    {{- "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" -}}
    {%- for tool in tools -%}
        {{- "\n" -}}{{- tool | tojson -}}
    {%- endfor -%}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" -}}
{%- elif messages[0].role == 'system' -%}
    {{- '<|im_start|>system\n' + render_content(messages[0].content, false) + '<|im_end|>\n' -}}
{%- endif -%}
{%- for message in messages -%}
    {%- if message.role == 'system' and loop.first -%}
    {%- elif message.role == 'user' or message.role == 'system' -%}
        {{- '<|im_start|>' + message.role + '\n' + render_content(message.content, true) + '<|im_end|>\n' -}}
    {%- elif message.role == 'assistant' -%}
        {{- '<|im_start|>assistant\n' -}}
        {%- if message.content -%}{{- render_content(message.content, true) -}}{%- endif -%}
        {%- if message.tool_calls -%}
            {%- for tool_call in message.tool_calls -%}
                {%- if (loop.first and message.content) or (not loop.first) -%}{{- '\n' -}}{%- endif -%}
                {%- if tool_call.function -%}{%- set tool_call = tool_call.function -%}{%- endif -%}
                {{- '<tool_call>\n{"name": "' + tool_call.name + '", "arguments": ' -}}
                {%- if tool_call.arguments is string -%}{{- tool_call.arguments -}}
                {%- else -%}{{- tool_call.arguments | tojson -}}{%- endif -%}
                {{- '}\n</tool_call>' -}}
            {%- endfor -%}
        {%- endif -%}
        {{- '<|im_end|>\n' -}}
    {%- elif message.role == 'tool' -%}
        {%- if loop.first or messages[loop.index0 - 1].role != 'tool' -%}{{- '<|im_start|>user' -}}{%- endif -%}
        {{- '\n<tool_response>\n' + render_content(message.content, true) + '\n</tool_response>' -}}
        {%- if loop.last or messages[loop.index0 + 1].role != 'tool' -%}{{- '<|im_end|>\n' -}}{%- endif -%}
    {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{- '<|im_start|>assistant\n' -}}
{%- endif -%}
""".strip()
