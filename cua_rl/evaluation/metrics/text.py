"""Metrics on values a getter returned directly (strings, lists, JSON objects).

Semantics follow OSWorld's `metrics/general.py`: `rules` is the `rules` object
of a `rule` getter, most metrics read `rules["expected"]`. Where OSWorld would
crash on an agent-produced value (None, unparsable JSON) we score 0 instead:
a malformed answer is a failed task, not a broken evaluator.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from cua_rl.eval_libraries import require
from cua_rl.evaluation.registry import metric

log = logging.getLogger(__name__)

EVALUATION_FAILED = "__EVALUATION_FAILED__"
"""What a getter puts in an expected value it could not compute (OSWorld's marker)."""


@metric("exact_match")
def exact_match(result: Any, rules: Mapping[str, Any]) -> float:
    """1 when the result equals `rules.expected` (Python equality, types matter)."""
    return float(result == rules["expected"])


@metric("match_in_list")
def match_in_list(result: Any, rules: Mapping[str, Any]) -> float:
    """1 when the result is one of the accepted values in `rules.expected`."""
    try:
        return float(result in rules["expected"])
    except TypeError:
        return 0.0


@metric("is_in_list")
def is_in_list(result: Any, rules: Mapping[str, Any]) -> float:
    """1 when `rules.expected` is an element (or substring) of the result."""
    try:
        return float(rules["expected"] in result)
    except TypeError:  # result None or not a container
        return 0.0


@metric("fuzzy_match")
def fuzzy_match(result: Any, rules: Mapping[str, Any]) -> float:
    """Levenshtein similarity ratio in [0, 1] between result and `rules.expected`."""
    fuzz = require("rapidfuzz.fuzz", "rapidfuzz", metric="fuzzy_match")
    if result is None:
        return 0.0
    return fuzz.ratio(str(result), str(rules["expected"])) / 100.0


@metric("literal_match")
def literal_match(
    result: Any, expected: Any, *, type: str = "str", ignore_case: bool = False
) -> float:
    """String (or list-of-strings) equality of two values, optionally case-blind."""

    def norm(value: Any) -> str:
        return str(value).lower() if ignore_case else str(value)

    if type == "str":
        return float(norm(result) == norm(expected))
    if type == "list":
        if not isinstance(result, list | tuple) or not isinstance(expected, list | tuple):
            return 0.0
        return float([norm(v) for v in result] == [norm(v) for v in expected])
    raise ValueError(f"literal_match: option 'type' must be 'str' or 'list', got {type!r}")


@metric("check_include_exclude")
def check_include_exclude(result: Any, rules: Mapping[str, Any]) -> float:
    """1 when every `include` string occurs in the result and no `exclude` string does."""
    if result is None:
        return 0.0
    include = rules.get("include", [])
    exclude = rules.get("exclude", [])
    return float(all(s in result for s in include) and all(s not in result for s in exclude))


def _as_json_object(result: Any) -> Any:
    """OSWorld accepts a dict or its printed form (single quotes turned double)."""
    if isinstance(result, str):
        try:
            return json.loads(result.strip().replace("'", '"'))
        except ValueError:
            return None
    return result


@metric("check_direct_json_object")
def check_direct_json_object(result: Any, rules: Mapping[str, Any]) -> float:
    """Compare selected keys of a JSON object with `rules.expected`.

    Default: every expected key must have an equal value; with
    `rules.ignore_list_order` (beside `expected`, as OSWorld reads it) both
    values are compared sorted.
    With `expect_in_result`: a list expected value means "any of these is in
    the result's list or equals its string"; a string means "is in the result's
    value" as Python's `in` reads it (substring of a string, member of a list).
    An expected value "__EVALUATION_FAILED__" (a getter's failure marker) scores 0.
    """
    data = _as_json_object(result)
    if not isinstance(data, Mapping):
        return 0.0
    expected = rules["expected"]
    if any(value == EVALUATION_FAILED for value in expected.values()):
        return 0.0
    try:
        if not rules.get("expect_in_result", False):
            unordered = bool(rules.get("ignore_list_order", False))
            for key, want in expected.items():
                got = data.get(key)
                if unordered:
                    if sorted(want) != sorted(got):  # OSWorld sorts whatever the values are
                        return 0.0
                elif want != got:
                    return 0.0
            return 1.0
        for key, want in expected.items():
            got = data.get(key)
            if isinstance(want, list):
                hit = any(
                    (isinstance(got, list) and w in got) or (isinstance(got, str) and w == got)
                    for w in want
                )
                if not hit:
                    return 0.0
            elif isinstance(want, str):
                # OSWorld's `want in got`: a substring of a string, a member of
                # a list, a key of an object
                if not isinstance(got, str | list | Mapping) or want not in got:
                    return 0.0
            else:
                return 0.0
        return 1.0
    except TypeError:  # unorderable lists, odd value types from the agent's page
        return 0.0


@metric("infeasible")
def infeasible(*_: Any, **__: Any) -> float:
    """Placeholder: `evaluate` scores infeasible tasks from the agent's last action
    (1 only for `terminate` with status failure) and never calls this."""
    raise RuntimeError("'infeasible' is scored by evaluate() from the last action")
