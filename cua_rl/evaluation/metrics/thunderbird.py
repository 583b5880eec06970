"""Thunderbird metrics on profile files (prefs.js, msgFilterRules.dat, mbox
folders), following OSWorld's `metrics/thunderbird.py`. A missing file scores 0.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cua_rl.evaluation.metrics.rules import match_value_to_rule
from cua_rl.evaluation.registry import metric

log = logging.getLogger(__name__)

PathLike = str | Path | None

_PREF = re.compile(r'^user_pref\("(?P<key>(?:[^"]|\\")+)", (?P<val>.+)\);$')


def _lines(path: PathLike) -> list[str] | None:
    if not path or not Path(path).is_file():
        return None
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.readlines()


class _NotJson(ValueError):
    """A prefs.js value that is not a JSON literal (OSWorld's `json.loads` raises)."""


def _pref_value(raw: str, path: PathLike, line_no: int) -> Any:
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise _NotJson(
            f"{path}:{line_no}: user_pref value {raw[:40]!r} is not a JSON "
            f"literal (Thunderbird writes double-quoted strings, numbers, "
            f"true/false)"
        ) from exc


@metric("check_thunderbird_prefs")
def check_thunderbird_prefs(result: PathLike, rule: Mapping[str, Mapping[str, Any]]) -> float:
    """Each `rule.expect[pref]` rule holds for the pref's last `user_pref(...)` value
    (an absent pref fails) and no `rule.unexpect[pref]` rule holds for any of its
    values. A pref listed under both is checked only as expected, as in OSWorld.

    A value that is not a JSON literal (such as a single-quoted string, which
    Thunderbird never writes) makes OSWorld's `json.loads` raise; the file is
    then not a prefs.js we can judge, and scores 0.
    """
    lines = _lines(result)
    if lines is None:
        return 0.0
    expect, unexpect = rule.get("expect", {}), rule.get("unexpect", {})
    found = dict.fromkeys(expect, False)
    clean = True
    for line_no, line in enumerate(lines, start=1):
        match = _PREF.match(line.strip())
        if match is None:
            continue
        key = match.group("key")
        try:
            value = _pref_value(match.group("val"), result, line_no)
        except _NotJson as exc:
            log.info("check_thunderbird_prefs: %s; scoring 0", exc)
            return 0.0
        if key in expect:
            found[key] = match_value_to_rule(value, expect[key])
        elif key in unexpect:
            clean = clean and not match_value_to_rule(value, unexpect[key])
    return float(all(found.values()) and clean)


def _unescape(value: str) -> str:
    return value.replace('\\"', '"').replace("\\\\", "\\")


_CONDITION = re.compile(
    r"""\b(?:AND|OR) \((?:[\w ]+),(?:[\w ']+),(?:"(?:(?:[^"]|\")+)"|(?:[^)]+))\)|\bALL\b"""
)
_FIELDS = ("name", "enabled", "type", "action", "actionValue")


def parse_filters(lines: list[str]) -> list[dict[str, Any]] | None:
    """Filters of a msgFilterRules.dat: one dict per `name=` ... `condition=` block.

    Values are sliced as OSWorld does: after `key="` and before the final `"` and
    line end; a filter is complete (and listed) at its `condition=` line, whose
    conditions are split into `AND (field,op,value)` / `OR (...)` / `ALL` terms.
    None when a filter field comes before the first `name=` line: OSWorld's
    parser has no filter to put it in and raises, and Thunderbird never writes
    such a file.
    """
    filters: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    for line in lines:
        key = line.split("=", 1)[0]
        if key == "name":
            current = {}
        if current is None and (key in _FIELDS or key == "condition"):
            return None
        if current is None:
            continue
        if key in _FIELDS:
            current[key] = _unescape(line[len(key) + 2 : -2])
        elif key == "condition":
            current["condition"] = _CONDITION.findall(_unescape(line[11:-2]))
            filters.append(current)
    return filters


def _match_record(pattern: Mapping[str, Any], record: Mapping[str, Any]) -> bool:
    return all(k in record and record[k] == v for k, v in pattern.items())


@metric("check_thunderbird_filter")
def check_thunderbird_filter(result: PathLike, rules: Mapping[str, Any]) -> float:
    """Each `rules.expect` pattern (e.g. {"action": ..., "condition": [...]}) matches
    some filter and no `rules.unexpect` pattern matches any."""
    lines = _lines(result)
    if lines is None:
        return 0.0
    filters = parse_filters(lines)
    if filters is None:
        log.info(
            "check_thunderbird_filter: %s: a filter field comes before the first "
            "name= line; scoring 0",
            result,
        )
        return 0.0
    expect, unexpect = rules.get("expect", []), rules.get("unexpect", [])
    found = all(any(_match_record(p, f) for f in filters) for p in expect)
    clean = not any(_match_record(p, f) for p in unexpect for f in filters)
    return float(found and clean)


def _folder_digest(path: str, options: Mapping[str, Any]) -> str:
    """OSWorld's `read_thunderbird_folder_file`, kept exactly as it computes.

    It splits the text on "FROM - " and means to keep the messages, but its
    filter keeps only the *blank* pieces (`if mail.strip(): continue`), so the
    digest is "FROM - " once per blank piece (once in all with remove_duplicate)
    and the message contents never take part. In practice two existing folders
    compare equal unless exactly one of them is empty. Reproduced so that scores
    match OSWorld; do not fix here without fixing the task's reference.
    """
    text = Path(path).read_text(encoding="utf-8", errors="replace").strip()
    pieces = ["FROM - " + piece.strip() for piece in text.split("FROM - ") if not piece.strip()]
    if options.get("remove_duplicate", True):
        pieces = list(set(pieces))
    return "\n".join(sorted(pieces))


@metric("check_thunderbird_folder")
def check_thunderbird_folder(result: Any, reference: Any, **options: Any) -> float:
    """Each result folder file (mbox) equals its reference, per OSWorld's digest
    (see `_folder_digest`). Options: ignore_status, ignore_keys, remove_deleted,
    remove_duplicate (only the last one can change a score)."""
    if not isinstance(reference, list):
        result, reference = [result], [reference]
    for pred, gold in zip(result, reference, strict=False):
        if pred is None or not Path(pred).is_file():
            return 0.0
        if _folder_digest(pred, options) != _folder_digest(gold, options):
            return 0.0
    return 1.0
