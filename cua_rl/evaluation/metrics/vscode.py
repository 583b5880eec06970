"""VS Code and code-file metrics, following OSWorld's `metrics/vscode.py` and
`compare_python_pure_text` of `metrics/general.py`.

`check_python_file_by_test_suite` runs the task's test file in a child Python
process (OSWorld imports it into the evaluator and chdirs, which would touch
every episode sharing this process); the test's `test()` result is read the
same way: bool -> 0/1, number -> clipped to [0, 1], anything else by truthiness.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cua_rl.evaluation.metrics.files import read_text
from cua_rl.evaluation.registry import metric

log = logging.getLogger(__name__)

PathLike = str | Path | None


def _load_json(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


@metric("check_json_settings")
def check_json_settings(actual: PathLike, expected: Mapping[str, Any]) -> float:
    """Every key of `expected.expected` is in the JSON object with an equal value
    (a file with comments or trailing commas does not parse and scores 0)."""
    data = _load_json(read_text(actual))
    if not isinstance(data, dict):
        return 0.0
    return float(all(k in data and data[k] == v for k, v in expected["expected"].items()))


@metric("check_json_keybindings")
def check_json_keybindings(actual: PathLike, expected: Mapping[str, Any]) -> float:
    """`expected.expected` is one of the entries of keybindings.json (a JSON array,
    parsed whole or after dropping its first line, VS Code's comment header)."""
    text = read_text(actual)
    if text is None:
        return 0.0
    for candidate in (text, text.split("\n", 1)[1] if "\n" in text else ""):
        data = _load_json(candidate)
        if isinstance(data, list):
            return float(expected["expected"] in data)
    return 0.0


def _is_subset(expected: Any, actual: Any) -> bool:
    """Objects recursively by key; anything else (lists included) by equality."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            k in actual and _is_subset(v, actual[k]) for k, v in expected.items()
        )
    return expected == actual


@metric("compare_config")
def compare_config(
    actual: PathLike, rules: Mapping[str, Any], *, containment_ok: bool = True
) -> float:
    """The file holds `rules.expected`.

    With `containment_ok` (default): when both parse as JSON, the expected value
    must be a recursive subset of the file's; when either does not parse, the
    stripped expected text must occur in the file. Without it: identical text,
    or equal JSON values.
    """
    text = read_text(actual)
    wanted = rules.get("expected")
    if text is None or not wanted:
        return 0.0
    got_json, wanted_json = _load_json(text), _load_json(wanted)
    parsed = got_json is not None or text.strip() == "null"
    wanted_parsed = wanted_json is not None or wanted.strip() == "null"
    if containment_ok:
        if parsed and wanted_parsed:
            return float(_is_subset(wanted_json, got_json))
        return float(wanted.strip() in text)
    if text == wanted:
        return 1.0
    return float(parsed and wanted_parsed and got_json == wanted_json)


@metric("is_extension_installed")
def is_extension_installed(actual: str | None, rules: Mapping[str, Any]) -> float:
    """`rules.type` "contain" / "not_contain": whether `rules.expected` occurs in the
    command's output (None, a refused command, scores 0)."""
    if rules["type"] not in ("contain", "not_contain"):
        raise ValueError(f"is_extension_installed: unknown rule type {rules['type']!r}")
    if actual is None:
        return 0.0
    present = rules["expected"] in actual
    return float(present if rules["type"] == "contain" else not present)


_RUN_TEST = """
import importlib.util, json, sys
path, name = sys.argv[1], sys.argv[2]
sys.path.insert(0, sys.argv[3])
spec = importlib.util.spec_from_file_location("osworld_test_suite", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
func = getattr(module, name, None)
if not callable(func):
    sys.exit(3)
result = func()
if isinstance(result, bool):
    score = float(result)
elif isinstance(result, (int, float)):
    score = max(0.0, min(1.0, float(result)))
else:
    score = float(bool(result))
print("\\n__SCORE__" + json.dumps(score))
"""


@metric("check_python_file_by_test_suite")
def check_python_file_by_test_suite(
    actual_files: Any,
    test_file: PathLike,
    *,
    test_function_name: str = "test",
    timeout_s: float = 300.0,
) -> float:
    """Score of the test file's `test_function_name()`, run with the test file's
    folder (where the fetched result files land) as working directory and first
    on sys.path. Import errors, exceptions, a missing function or a timeout score 0."""
    if not test_file or not Path(test_file).is_file():
        return 0.0
    test_path = Path(test_file).resolve()
    try:
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                _RUN_TEST,
                str(test_path),
                test_function_name,
                str(test_path.parent),
            ],
            cwd=test_path.parent,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        log.info("check_python_file_by_test_suite: %s timed out", test_path)
        return 0.0
    marker = proc.stdout.rfind("__SCORE__")
    if proc.returncode != 0 or marker < 0:
        log.info(
            "check_python_file_by_test_suite: %s failed (%s): %s",
            test_path,
            proc.returncode,
            proc.stderr[-2000:],
        )
        return 0.0
    return float(json.loads(proc.stdout[marker + len("__SCORE__") :].strip()))


_METADATA_PREFIXES = ("#!", "# -*- coding:", "# coding:", "# coding=")


def _python_lines(text: str) -> list[str]:
    """OSWorld's normalization: shebang/coding lines among the first three lines
    (while they come first) are skipped; blank lines dropped; tabs expanded to 4
    columns and trailing spaces removed. Indentation and inner spaces stay, so
    a wrongly indented or extra line of code (or markdown fences) still differs."""
    lines = text.splitlines()
    start = 0
    while start < min(len(lines), 3) and lines[start].strip().startswith(_METADATA_PREFIXES):
        start += 1
    return [line.expandtabs(4).rstrip() for line in lines[start:] if line.strip()]


@metric("compare_python_pure_text")
def compare_python_pure_text(py_file_path: PathLike, gold_file_path: PathLike) -> float:
    """1 when both Python files have the same lines once normalized (`_python_lines`)."""
    got, want = read_text(py_file_path), read_text(gold_file_path)
    if got is None or want is None:
        return 0.0
    return float(_python_lines(got) == _python_lines(want))


@metric("compare_result_files")
def compare_result_files(src_path: PathLike, tgt_path: PathLike) -> float:
    """The answer file matches the gold one: when the gold is a number, the gold text
    occurring in the answer or a number within 1e-4 passes; otherwise equal text
    (both stripped)."""
    got, want = read_text(src_path), read_text(tgt_path)
    if got is None or want is None:
        return 0.0
    got, want = got.strip(), want.strip()
    try:
        gold = float(want)
    except ValueError:
        return float(got == want)
    if want in got:
        return 1.0
    try:
        return float(abs(float(got) - gold) < 1e-4)
    except ValueError:
        return float(got == want)
