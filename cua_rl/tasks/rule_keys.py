"""The keys a metric reads from its rule object and its free-form options, so a
typo in a pair's evaluator fails `templates validate` instead of being ignored.

A metric such as `check_include_exclude(result, rules)` reads `rules["include"]`
and `rules.get("exclude", [])`: a rule written `{"include": [...], "exlude": [...]}`
passes the structural check and the signature check, and even the golden
solution (it satisfies "include"), yet the exclusion it meant is never checked.

The accepted keys are read from the metric's own source with `ast` (keys used
as `x["k"]`, `x.get("k")` or `"k" in x`, following `x` into module-level helpers
it is passed to), so they cannot drift from what the metric really reads. When
the parameter is used any other way (iterated, passed to a function whose source
is not at hand), the accepted set is unknown and nothing is reported: a check
that cannot be exact stays silent rather than reject a valid rule.
"""

from __future__ import annotations

import ast
import difflib
import functools
import inspect
import textwrap
from collections.abc import Callable, Mapping
from typing import Any

MAX_DEPTH = 3
"""Helper calls followed from a metric (rule -> helper -> helper)."""


def _function_node(func: Callable[..., Any]) -> ast.FunctionDef | None:
    try:
        source = textwrap.dedent(inspect.getsource(func))
    except (OSError, TypeError):
        return None
    node = ast.parse(source).body[0]
    return node if isinstance(node, ast.FunctionDef) else None


def _keys_read(func: Callable[..., Any], name: str, depth: int = 0) -> frozenset[str] | None:
    """Constant keys read from parameter `name` of `func`; None when it is used in
    a way that could read other keys."""
    node = _function_node(func)
    if node is None or depth > MAX_DEPTH:
        return None
    parents = {child: parent for parent in ast.walk(node) for child in ast.iter_child_nodes(parent)}
    keys: set[str] = set()
    for use in ast.walk(node):
        if not (isinstance(use, ast.Name) and use.id == name and isinstance(use.ctx, ast.Load)):
            continue
        parent = parents.get(use)
        if (
            isinstance(parent, ast.Subscript)
            and parent.value is use
            and isinstance(parent.slice, ast.Constant)
            and isinstance(parent.slice.value, str)
        ):
            keys.add(parent.slice.value)
        elif (
            isinstance(parent, ast.Attribute)
            and parent.value is use
            and parent.attr == "get"
            and isinstance(call := parents.get(parent), ast.Call)
            and call.args
            and isinstance(call.args[0], ast.Constant)
            and isinstance(call.args[0].value, str)
        ):
            keys.add(call.args[0].value)
        elif (
            isinstance(parent, ast.Compare)
            and use in parent.comparators
            and isinstance(parent.left, ast.Constant)
            and isinstance(parent.left.value, str)
        ):
            keys.add(parent.left.value)
        elif isinstance(parent, ast.Call) and use in parent.args:
            inner = _helper_keys(func, parent, parent.args.index(use), depth)
            if inner is None:
                return None
            keys |= inner
        elif isinstance(parent, ast.UnaryOp | ast.BoolOp) or (
            isinstance(parent, ast.Call)
            and isinstance(parent.func, ast.Name)
            and parent.func.id in ("isinstance", "bool", "len")
        ):
            continue  # a truth test or a type check reads no key
        else:
            return None
    return frozenset(keys)


def _helper_keys(
    func: Callable[..., Any], call: ast.Call, index: int, depth: int
) -> frozenset[str] | None:
    """Keys a module-level helper reads from its `index`-th positional argument."""
    if isinstance(call.func, ast.Name) and call.func.id in ("isinstance", "bool", "len"):
        return frozenset()
    if not isinstance(call.func, ast.Name):
        return None
    helper = getattr(func, "__globals__", {}).get(call.func.id)
    if not inspect.isfunction(helper):
        return None
    params = [
        p
        for p in inspect.signature(helper).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    if index >= len(params):
        return None
    return _keys_read(helper, params[index].name, depth + 1)


@functools.cache
def rule_keys(func: Callable[..., Any]) -> frozenset[str] | None:
    """Keys the metric reads from its second positional argument (the value of
    its `expected` getter, a `rule` getter's `rules` object); None if unknown."""
    params = list(inspect.signature(func).parameters.values())
    if len(params) < 2 or params[1].kind not in (
        params[1].POSITIONAL_ONLY,
        params[1].POSITIONAL_OR_KEYWORD,
    ):
        return None
    return _keys_read(func, params[1].name)


@functools.cache
def free_option_keys(func: Callable[..., Any]) -> frozenset[str] | None:
    """Keys the metric reads from its `**options`; None if it has none or it is
    used in a way that could read other keys (named options are checked by the
    signature already)."""
    var_kw = [p for p in inspect.signature(func).parameters.values() if p.kind is p.VAR_KEYWORD]
    if not var_kw:
        return None
    return _keys_read(func, var_kw[0].name)


def _unknown(keys: Mapping[str, Any], accepted: frozenset[str]) -> list[tuple[str, str]]:
    """(key, suggestion text) of keys the metric never reads ('_' keys are comments)."""
    out = []
    for key in keys:
        if key in accepted or str(key).startswith("_"):
            continue
        close = difflib.get_close_matches(str(key), sorted(accepted), n=1, cutoff=0.6)
        out.append((str(key), f" (did you mean {close[0]!r}?)" if close else ""))
    return out


def _aligned(spec: Mapping[str, Any], key: str, n: int | None) -> list[Any]:
    value = spec.get(key)
    if n is None:
        return [value]
    return list(value) if isinstance(value, list) and len(value) == n else [None] * n


def rule_key_findings(spec: Any) -> list[tuple[str, str]]:
    """(JSON sub-path under the evaluator, what was expected) for every rule or
    option key a metric of `spec` does not read. Names and shapes are checked
    elsewhere; a malformed spec gives no findings here."""
    from cua_rl.evaluation.registry import METRICS

    if not isinstance(spec, Mapping):
        return []
    func = spec.get("func")
    names, n = (
        ([func], None)
        if isinstance(func, str)
        else ((func, len(func)) if isinstance(func, list) else ([], None))
    )
    findings: list[tuple[str, str]] = []
    for i, (name, expected, options) in enumerate(
        zip(names, _aligned(spec, "expected", n), _aligned(spec, "options", n), strict=True)
    ):
        metric = METRICS.get(name) if isinstance(name, str) else None
        if metric is None:
            continue
        at = "" if n is None else f"[{i}]"
        if (
            isinstance(expected, Mapping)
            and expected.get("type") == "rule"
            and isinstance(expected.get("rules"), Mapping)
            and (accepted := rule_keys(metric.func))
        ):
            for key, hint in _unknown(expected["rules"], accepted):
                findings.append(
                    (
                        f".expected{at}.rules.{key}",
                        f"a rule key metric {name!r} reads ({', '.join(sorted(accepted))})"
                        f", not {key!r}{hint}",
                    )
                )
        if isinstance(options, Mapping) and (accepted := free_option_keys(metric.func)):
            for key, hint in _unknown(options, accepted):
                findings.append(
                    (
                        f".options{at}.{key}",
                        f"an option metric {name!r} reads ({', '.join(sorted(accepted))})"
                        f", not {key!r}{hint}",
                    )
                )
    return findings
