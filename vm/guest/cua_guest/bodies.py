"""Reading and validating request bodies.

Every route reads its input through these helpers so that a malformed request
always becomes a 400 JSON error naming the field and what was expected, never a
500 with a traceback. OSWorld's host code sends JSON for most routes and form
fields for a few (/file, /window_size); `read_fields` accepts either.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

#: Deepest nesting of arrays/objects accepted in a JSON body. No route needs more
#: than a handful of levels; the limit keeps a hostile body from exhausting the
#: parser's recursion (which would otherwise surface as a 500).
MAX_JSON_DEPTH = 64


class BadRequest(Exception):
    """The request body is not what the route expects; becomes HTTP 400."""


def json_error(status: int, message: str, **extra: Any) -> web.Response:
    """One JSON error shape for every route: {"status": "error", "message": ...}."""
    return web.json_response({"status": "error", "message": message, **extra}, status=status)


async def read_json(request: web.Request) -> dict[str, Any]:
    """Parse the body as a JSON object (an empty body counts as {})."""
    raw = await request.read()
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadRequest(f"request body: expected a JSON object ({exc})") from None
    except RecursionError:
        raise BadRequest(_too_deep()) from None
    if _depth(body) > MAX_JSON_DEPTH:
        raise BadRequest(_too_deep())
    if not isinstance(body, dict):
        raise BadRequest(f"request body: expected a JSON object, got {type(body).__name__}")
    return body


async def read_fields(request: web.Request) -> dict[str, Any]:
    """Read a JSON object or form fields, whichever the client sent."""
    if request.content_type in ("application/x-www-form-urlencoded", "multipart/form-data"):
        try:
            form = await request.post()
        except (ValueError, AssertionError, UnicodeDecodeError) as exc:
            # aiohttp's form parsers raise these for a body that is not the declared form.
            raise BadRequest(f"request body: expected {request.content_type} ({exc})") from None
        return {key: value for key, value in form.items() if isinstance(value, str)}
    return await read_json(request)


def _too_deep() -> str:
    return f"request body: JSON nested deeper than {MAX_JSON_DEPTH} levels"


def _depth(value: Any) -> int:
    """Nesting depth of a parsed JSON value, computed without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, level)
        if deepest > MAX_JSON_DEPTH:
            return deepest
        stack.extend((child, level + 1) for child in children)
    return deepest


def require_str(body: dict[str, Any], field: str) -> str:
    """A required, non-empty string field."""
    value = body.get(field)
    if not isinstance(value, str) or not value:
        raise BadRequest(f"{field}: expected a non-empty string, got {_describe(value)}")
    return value


def optional_bool(body: dict[str, Any], field: str, default: bool) -> bool:
    """An optional boolean; also accepts the strings form posts carry ("true"/"false")."""
    value = body.get(field, default)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false", "1", "0"):
        return value.lower() in ("true", "1")
    raise BadRequest(f"{field}: expected true or false, got {_describe(value)}")


def optional_number(
    body: dict[str, Any], field: str, default: float, *, low: float, high: float
) -> float:
    """An optional number within [low, high]."""
    value = body.get(field, default)
    if value is None:
        return default
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise BadRequest(f"{field}: expected a number, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadRequest(f"{field}: expected a number, got {_describe(value)}")
    if not low <= value <= high:
        raise BadRequest(f"{field}: expected a number between {low:g} and {high:g}, got {value}")
    return float(value)


def command_field(body: dict[str, Any], shell: bool) -> list[str] | str:
    """OSWorld's `command`: a list of strings, or a string (split unless shell)."""
    value = body.get("command")
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, list) and value and all(isinstance(arg, str) for arg in value):
        return list(value)
    raise BadRequest(
        "command: expected a non-empty list of strings or a non-empty string, "
        f"got {_describe(value)}"
    )


def _describe(value: Any) -> str:
    """Short description of a bad value for error messages."""
    if value is None:
        return "nothing (field missing or null)"
    text = repr(value)
    return f"{type(value).__name__} {text[:60]}{'...' if len(text) > 60 else ''}"
