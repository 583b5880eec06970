"""The configuration reference (docs/configuration.md), generated from the pydantic
models themselves so that it cannot drift: every field of a run config with its
dotted key, type, default and the docstring written under it in the source.

`cua-rl config reference` prints it; a test checks the committed page is current.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
import types
import typing
from pathlib import PurePath
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

HEADER = """\
# Configuration reference

Generated from the pydantic models by `cua-rl config reference` (do not edit by
hand). A run is configured by a preset or a YAML file plus `dotted.key=value`
overrides; `cua-rl config show [--preset NAME] [k=v ...]` prints the resolved
result. Every field has a working default.
"""


def field_docs(model: type[BaseModel]) -> dict[str, str]:
    """Docstrings written under the fields of `model`'s class body (and its bases')."""
    docs: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if not (isinstance(cls, type) and issubclass(cls, BaseModel)) or cls is BaseModel:
            continue
        try:
            body = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0].body  # type: ignore[attr-defined]  # a class body's first statement is its ClassDef
        except (OSError, TypeError):
            continue
        for node, nxt in zip(body, body[1:], strict=False):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(nxt, ast.Expr)
                and isinstance(nxt.value, ast.Constant)
                and isinstance(nxt.value.value, str)
            ):
                docs[node.target.id] = " ".join(inspect.cleandoc(nxt.value.value).split())
    return docs


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation holds (a union of variants gives several)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _models_in(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]
    return []


def _type_name(annotation: Any) -> str:
    if isinstance(annotation, type):
        return annotation.__name__
    text = str(annotation).replace("typing.", "")
    for prefix in ("cua_rl.", "pathlib."):
        while prefix in text:
            start = text.index(prefix)
            end = start
            while end < len(text) and (text[end].isalnum() or text[end] in "._"):
                end += 1
            text = text[:start] + text[start:end].rsplit(".", 1)[-1] + text[end:]
    return text


def _default(field: Any) -> str:
    """The default as a reader would write it in YAML; a value computed per machine
    (a path under the home directory, this interpreter) says so instead, so the
    page is the same wherever it is generated."""
    if field.default is not PydanticUndefined:
        value = field.default
    elif field.default_factory is not None:
        value = field.default_factory()
        if isinstance(value, BaseModel):
            return "(section)"
        if value not in ([], {}, ()):
            return "(computed when the run starts)"
    else:
        return "required"
    if isinstance(value, BaseModel):
        return "(section)"
    if isinstance(value, PurePath):
        value = str(value)
    return f"`{value}`" if isinstance(value, str) else f"`{value!r}`"


def render(model: type[BaseModel], prefix: str = "", title: str = "Run configuration") -> str:
    """Markdown sections: one table of the model's plain fields, then its sub-models."""
    docs = field_docs(model)
    rows, subs = [], []
    for name, field in model.model_fields.items():
        key = f"{prefix}{name}"
        nested = _models_in(field.annotation)
        if nested:
            for sub in nested:
                variant = sub.model_fields.get("type")
                label = (
                    key
                    if len(nested) == 1 or variant is None
                    else f"{key} (type: {variant.default})"
                )
                subs.append(render(sub, f"{key}.", label))
            if len(nested) > 1 or field.annotation is not nested[0]:
                rows.append(
                    (key, _type_name(field.annotation), _default(field), docs.get(name, ""))
                )
            continue
        rows.append((key, _type_name(field.annotation), _default(field), docs.get(name, "")))
    out = [f"## `{title}`" if prefix else f"## {title}", ""]
    doc = inspect.getdoc(model)
    if doc and doc != inspect.getdoc(BaseModel):
        out += [" ".join(doc.split()), ""]
    if rows:
        out += ["| key | type | default | meaning |", "| --- | --- | --- | --- |"]
        out += [f"| `{k}` | {_cell(t)} | {_cell(d)} | {_cell(m)} |" for k, t, d, m in rows]
        out.append("")
    return "\n".join(out + subs)


def _cell(text: str) -> str:
    """A table cell: pipes escaped so a union type does not split the row."""
    return text.replace("|", "\\|")


def reference() -> str:
    from cua_rl.config import RunConfig

    return HEADER + "\n" + render(RunConfig).rstrip("\n") + "\n"
