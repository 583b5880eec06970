"""Unknown config keys: which keys the section has, and the one the user probably meant.

Every config model forbids extra keys, so a typo (`episode.max_step=5`) is an
error rather than a silently ignored setting; this module turns pydantic's
"extra inputs are not permitted" into `episode.max_step: unknown key (did you
mean 'max_steps'?)`, looking the section up in the model the config is built from.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Sequence

from pydantic import BaseModel


def unknown_key_message(model: type[BaseModel], loc: Sequence[str | int]) -> str:
    """`unknown key (did you mean 'x'?)` for the key at `loc`, or the section's keys
    when nothing is close."""
    known = sorted(keys_at(model, loc[:-1]))
    close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
    if close:
        return f"unknown key (did you mean {close[0]!r}?)"
    if known:
        return f"unknown key (this section has: {', '.join(known)})"
    return "unknown key"


def keys_at(model: type[BaseModel], section: Sequence[str | int]) -> set[str]:
    """The keys accepted at `section` (a pydantic error location without its last
    part). Parts that are not field names (a list index, a discriminated union's
    tag) keep the current models."""
    models = [model]
    for part in section:
        found = [f for m in models if (f := m.model_fields.get(str(part))) is not None]
        if found:
            models = [inner for f in found for inner in _models_in(f.annotation)]
        elif isinstance(part, str):  # a union tag: keep the members whose tag it is
            tagged = [m for m in models if _tag(m) == part]
            models = tagged or models
    return {name for m in models for name in m.model_fields}


def _models_in(annotation: object) -> list[type[BaseModel]]:
    """The pydantic models an annotation can hold (through Optional, unions,
    Annotated, lists and dicts)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    origin = typing.get_origin(annotation)
    if origin is None:
        return []
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        args = args[:1]
    elif origin is dict:
        args = args[1:]
    elif origin not in (typing.Union, types.UnionType, list, tuple, set, frozenset):
        return []
    return [m for arg in args for m in _models_in(arg)]


def _tag(model: type[BaseModel]) -> str | None:
    """The `type: Literal['x']` tag of a discriminated-union member, if it has one."""
    field = model.model_fields.get("type")
    if field is None:
        return None
    values = typing.get_args(field.annotation)
    return str(values[0]) if len(values) == 1 else None


def union_tags(model: type[BaseModel], loc: Sequence[str | int]) -> list[str]:
    """The `type` tags a discriminated union at `loc` accepts (empty when `loc` is
    not such a union), for a one-line message instead of pydantic's
    "Unable to extract tag using discriminator 'type'"."""
    models = [model]
    for part in loc:
        found = [f for m in models if (f := m.model_fields.get(str(part))) is not None]
        if not found:
            return []
        models = [inner for f in found for inner in _models_in(f.annotation)]
    tags = [t for m in models if (t := _tag(m)) is not None]
    return tags if len(tags) > 1 else []
