"""Metrics on plain-text files fetched from the desktop (text, CSV, JSON, lists).

Semantics follow OSWorld's `metrics/general.py` and `metrics/vscode.py`. The
result is a local path (or None when the getter found no file, which scores 0);
files the agent wrote but that do not parse or decode also score 0 (OSWorld's
`open()` raises on them). Deviations are listed in docs/evaluation-deviations.md.
"""

from __future__ import annotations

import csv
import difflib
import io
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cua_rl.evaluation.metrics.rules import match_value_to_rule
from cua_rl.evaluation.registry import metric

PathLike = str | Path | None


_BOM = b"\xef\xbb\xbf"


def _read_bytes(path: PathLike) -> bytes | None:
    if path is None:
        return None
    try:
        data = Path(path).read_bytes()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None
    return data[len(_BOM) :] if data.startswith(_BOM) else data


def read_text(path: PathLike) -> str | None:
    """The file as UTF-8 text (BOM dropped), or None when it is missing or not UTF-8.

    OSWorld opens these files with `open()` (strict UTF-8), which raises on
    other bytes; we score 0 instead, never a text with U+FFFD stand-ins that
    could make two different files look equal.
    """
    return _decode(_read_bytes(path), fallback=None)


def read_text_latin1_fallback(path: PathLike) -> str | None:
    """The file as UTF-8 text (BOM dropped), else as Latin-1, or None when missing.

    OSWorld's table metrics (`compare_csv`, `sheet_print`) read with UTF-8 and
    fall back to Latin-1, which decodes any byte: two different Latin-1 files
    stay different, and Latin-1 "café" equals UTF-8 "café".
    """
    return _decode(_read_bytes(path), fallback="latin-1")


def _decode(data: bytes | None, fallback: str | None) -> str | None:
    """UTF-8, else the fallback encoding (None: no text at all)."""
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode(fallback) if fallback else None


def file_lines(text: str) -> list[str]:
    """The lines `for line in open(path)` yields: universal newlines (\\r\\n and \\r
    become \\n), each line keeping its \\n; form feeds and other separators that
    `str.splitlines` breaks on stay inside the line."""
    return list(io.StringIO(text, newline=None))


@metric("diff_text_file")
def diff_text_file(result: PathLike, expected: PathLike) -> float:
    """Similarity in [0, 1] of the two files' line sequences (difflib ratio)."""
    got, want = read_text(result), read_text(expected)
    if got is None or want is None:
        return 0.0
    return difflib.SequenceMatcher(a=got.splitlines(), b=want.splitlines()).ratio()


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[\t\n]", " ", text).strip())


@metric("compare_text_file")
def compare_text_file(
    result: PathLike, expected: PathLike, *, ignore_blanks: bool = False, ignore_case: bool = False
) -> float:
    """1 when both files have the same text (optionally whitespace-/case-blind).

    Line endings are read as OSWorld's text-mode `open()` reads them (universal
    newlines: \\r\\n and \\r become \\n), so a file saved with CRLF equals
    the same text with LF.
    """
    got, want = read_text(result), read_text(expected)
    if got is None or want is None:
        return 0.0
    got, want = "".join(file_lines(got)), "".join(file_lines(want))
    if ignore_blanks:
        got, want = _squash(got), _squash(want)
    if ignore_case:
        got, want = got.lower(), want.lower()
    return float(got == want)


@metric("file_contains")
def file_contains(result: PathLike, rules: Mapping[str, Any]) -> float:
    """1 when the file contains every string of `rules.expected`."""
    text = read_text(result)
    if text is None:
        return 0.0
    return float(all(s in text for s in rules["expected"]))


@metric("check_list")
def check_list(result: PathLike, rules: Mapping[str, Any]) -> float:
    """Each `expect` regex matches some line; no `unexpect` regex matches any line.

    Lines are the file's lines as Python iterates a text file (ending with their
    newline), as in OSWorld, so a pattern may match the `\\n`.
    """
    text = read_text(result)
    if text is None:
        return 0.0
    lines = file_lines(text)
    expect = [re.compile(p) for p in rules.get("expect", [])]
    unexpect = [re.compile(p) for p in rules.get("unexpect", [])]
    found = all(any(p.search(line) for line in lines) for p in expect)
    clean = not any(p.search(line) for p in unexpect for line in lines)
    return float(found and clean)


def _match_record(pattern: Mapping[str, Any], record: Mapping[str, Any]) -> bool:
    return all(k in record and record[k] == v for k, v in pattern.items())


@metric("check_csv")
def check_csv(result: PathLike, rules: Mapping[str, Any]) -> float:
    """Each `expect` record pattern matches some row; no `unexpect` pattern matches any."""
    text = read_text(result)
    if text is None:
        return 0.0
    # the reader is given whole file lines so a quoted field may span several
    rows = list(csv.DictReader(file_lines(text)))
    expect = rules.get("expect", [])
    unexpect = rules.get("unexpect", [])
    found = all(any(_match_record(p, row) for row in rows) for p in expect)
    clean = not any(_match_record(p, row) for p in unexpect for row in rows)
    return float(found and clean)


@metric("compare_csv")
def compare_csv(
    result: PathLike,
    expected: PathLike | list[PathLike],
    *,
    strict: bool = True,
    ignore_case: bool = False,
) -> float:
    """1 when the result's lines equal those of the expected file (or of any of a list).

    `strict=False` strips each line; `ignore_case` lowercases both sides. Files
    that are not UTF-8 are read as Latin-1 (OSWorld's fallback).
    """
    got = read_text_latin1_fallback(result)
    if got is None:
        return 0.0
    candidates = expected if isinstance(expected, list) else [expected]

    def norm(text: str) -> list[str]:
        lines = text.splitlines()
        if not strict:
            lines = [line.strip() for line in lines]
        return [line.lower() for line in lines] if ignore_case else lines

    for candidate in candidates:
        want = read_text_latin1_fallback(candidate)
        if want is not None and norm(got) == norm(want):
            return 1.0
    return 0.0


def _load_json_or_yaml(path: PathLike, is_yaml: bool) -> Any:
    text = read_text(path)
    if text is None:
        return None
    try:
        if is_yaml:
            import yaml  # a core dependency; imported late to keep this module light

            return yaml.safe_load(text)
        return json.loads(text)
    except ValueError:
        return None
    except Exception as exc:  # yaml.YAMLError without importing yaml at module level
        if type(exc).__module__.startswith("yaml"):
            return None
        raise


@metric("check_json")
def check_json(result: PathLike, rules: Mapping[str, Any], *, is_yaml: bool = False) -> float:
    """Rules on values at key paths of a JSON (or YAML) file.

    Each `expect` rule `{key: [k1, k2, ...], method, ref}` must hold for the value
    at that path (a missing path fails); each `unexpect` rule must not hold (a
    missing path counts as the value None).
    """
    data = _load_json_or_yaml(result, is_yaml)
    if data is None:
        return 0.0
    for rule in rules.get("expect", []):
        value = data
        for key in rule["key"]:
            try:
                value = value[key]
            except (KeyError, IndexError, TypeError):
                return 0.0
        if not match_value_to_rule(value, rule):
            return 0.0
    for rule in rules.get("unexpect", []):
        value = data
        for key in rule["key"]:
            try:
                value = value[key]
            except (KeyError, IndexError, TypeError):
                value = None
                break
        if match_value_to_rule(value, rule):
            return 0.0
    return 1.0
