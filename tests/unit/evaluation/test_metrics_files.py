"""Text-file metrics on files the tests write."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cua_rl.evaluation import get_metric
from cua_rl.evaluation.metrics.rules import match_value_to_rule


def run(name: str, *args: object, **options: object) -> float:
    return get_metric(name).func(*args, **options)


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_compare_text_file(tmp_path: Path) -> None:
    a = write(tmp_path, "a.txt", "Hello  world\n")
    b = write(tmp_path, "b.txt", "hello world")
    assert run("compare_text_file", a, a) == 1.0
    assert run("compare_text_file", a, b) == 0.0
    assert run("compare_text_file", a, b, ignore_blanks=True, ignore_case=True) == 1.0
    assert run("compare_text_file", None, b) == 0.0


def test_diff_text_file_is_a_line_ratio(tmp_path: Path) -> None:
    a = write(tmp_path, "a.txt", "1\n2\n3\n4\n")
    b = write(tmp_path, "b.txt", "1\n2\n3\nX\n")
    assert run("diff_text_file", a, a) == 1.0
    assert run("diff_text_file", a, b) == pytest.approx(0.75)
    assert run("diff_text_file", str(tmp_path / "missing"), b) == 0.0


def test_file_contains_and_check_list(tmp_path: Path) -> None:
    path = write(tmp_path, "l.txt", "alpha 1\nbeta 22\n")
    assert run("file_contains", path, {"expected": ["alpha", "beta 2"]}) == 1.0
    assert run("file_contains", path, {"expected": ["gamma"]}) == 0.0
    assert run("check_list", path, {"expect": [r"beta \d+"], "unexpect": ["gamma"]}) == 1.0
    assert run("check_list", path, {"expect": [r"^alpha"], "unexpect": [r"\d\d"]}) == 0.0


def test_csv_metrics(tmp_path: Path) -> None:
    got = write(tmp_path, "got.csv", "name,n\nann,1\nbob,2\n")
    same = write(tmp_path, "same.csv", " name,n\nann,1\nbob,2 \n")
    other = write(tmp_path, "other.csv", "name,n\nann,1\n")
    assert (
        run(
            "check_csv", got, {"expect": [{"name": "bob", "n": "2"}], "unexpect": [{"name": "eve"}]}
        )
        == 1.0
    )
    assert run("check_csv", got, {"expect": [{"name": "bob", "n": "3"}]}) == 0.0
    assert run("compare_csv", got, [other, same], strict=False) == 1.0
    assert run("compare_csv", got, same) == 0.0


def test_check_json_and_yaml(tmp_path: Path) -> None:
    path = write(tmp_path, "s.json", json.dumps({"editor": {"fontSize": 14, "theme": "Dark+"}}))
    good = {
        "expect": [{"key": ["editor", "fontSize"], "method": "eq", "ref": 14}],
        "unexpect": [{"key": ["editor", "wordWrap"], "method": "eq", "ref": "on"}],
    }
    assert run("check_json", path, good) == 1.0
    assert (
        run(
            "check_json",
            path,
            {"expect": [{"key": ["editor", "theme"], "method": "re", "ref": "^Light"}]},
        )
        == 0.0
    )
    yml = write(tmp_path, "c.yaml", "a:\n  b: 3\n")
    assert (
        run(
            "check_json",
            yml,
            {"expect": [{"key": ["a", "b"], "method": "approx:0.5", "ref": 3.2}]},
            is_yaml=True,
        )
        == 1.0
    )
    assert (
        run(
            "check_json",
            yml,
            {"expect": [{"key": ["a", "c"], "method": "eq", "ref": 3}]},
            is_yaml=True,
        )
        == 0.0
    )


@pytest.mark.parametrize(
    ("value", "rule", "ok"),
    [
        ("Hello", {"method": "re.IGNORECASE", "ref": "^hello$"}, True),
        (5, {"method": "range.te", "ref": [1, 5]}, True),
        (1, {"method": "range.te", "ref": [1, 5]}, False),
        ("a,b", {"method": "str_set_eq", "ref": ["b", "a"]}, True),
        (None, {"method": "gt", "ref": 3}, False),
        ("x", {"method": "approx:0.1", "ref": 1}, False),
    ],
)
def test_rule_methods(value: object, rule: dict, ok: bool) -> None:
    assert match_value_to_rule(value, rule) is ok
