"""Value metrics: one passing and one failing case each, with OSWorld's semantics."""

from __future__ import annotations

import pytest

from cua_rl.evaluation import get_metric


def run(name: str, *args: object, **options: object) -> float:
    return get_metric(name).func(*args, **options)


@pytest.mark.parametrize(
    ("name", "result", "expected", "options", "score"),
    [
        ("exact_match", "42", {"expected": "42"}, {}, 1.0),
        ("exact_match", 42, {"expected": "42"}, {}, 0.0),
        ("match_in_list", "Bing", {"expected": ["Bing", "Google"]}, {}, 1.0),
        ("match_in_list", "Yahoo", {"expected": ["Bing", "Google"]}, {}, 0.0),
        ("is_in_list", ["/a", "/b"], {"expected": "/b"}, {}, 1.0),
        ("is_in_list", None, {"expected": "/b"}, {}, 0.0),
        ("literal_match", "Hello", "hello", {"ignore_case": True}, 1.0),
        ("literal_match", "Hello", "hello", {}, 0.0),
        ("literal_match", [1, "b"], ["1", "B"], {"type": "list", "ignore_case": True}, 1.0),
        ("literal_match", [1], ["1", "b"], {"type": "list"}, 0.0),
        (
            "check_include_exclude",
            "ok: 3 files",
            {"include": ["ok"], "exclude": ["error"]},
            {},
            1.0,
        ),
        ("check_include_exclude", "ok, error", {"include": ["ok"], "exclude": ["error"]}, {}, 0.0),
        ("check_direct_json_object", "{'a': 1, 'b': 'x'}", {"expected": {"a": 1}}, {}, 1.0),
        ("check_direct_json_object", {"a": 2}, {"expected": {"a": 1}}, {}, 0.0),
        ("check_direct_json_object", "not json", {"expected": {"a": 1}}, {}, 0.0),
        (
            "check_direct_json_object",
            {"tabs": ["a", "b"]},
            {"expected": {"tabs": ["b", "a"]}, "ignore_list_order": True},
            {},
            1.0,
        ),
        (
            "check_direct_json_object",
            {"tabs": ["a", "b"]},
            {"expected": {"tabs": ["b", "a"]}},
            {},
            0.0,
        ),
        (
            "check_direct_json_object",
            {"t": "__EVALUATION_FAILED__"},
            {"expected": {"t": "__EVALUATION_FAILED__"}},
            {},
            0.0,
        ),
        (
            "check_direct_json_object",
            {"tabs": None},
            {"expected": {"tabs": ["b", "a"]}, "ignore_list_order": True},
            {},
            0.0,
        ),
        (
            "check_direct_json_object",
            {"q": "best pizza nyc", "h": ["x", "y"]},
            {"expected": {"q": "pizza", "h": ["z", "y"]}, "expect_in_result": True},
            {},
            1.0,
        ),
        (
            "check_direct_json_object",
            {"q": "burgers"},
            {"expected": {"q": "pizza"}, "expect_in_result": True},
            {},
            0.0,
        ),
    ],
)
def test_value_metrics(
    name: str, result: object, expected: object, options: dict, score: float
) -> None:
    assert run(name, result, expected, **options) == score


def test_fuzzy_match_is_a_ratio() -> None:
    assert run("fuzzy_match", "kitten", {"expected": "kitten"}) == 1.0
    partial = run("fuzzy_match", "kitten", {"expected": "sitting"})
    assert 0.0 < partial < 0.8
    assert run("fuzzy_match", None, {"expected": "x"}) == 0.0


def test_infeasible_is_never_called_directly() -> None:
    with pytest.raises(RuntimeError, match="last action"):
        run("infeasible", None)
