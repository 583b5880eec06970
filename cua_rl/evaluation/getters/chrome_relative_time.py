"""`rule_relativeTime`: expected values that name dates relative to "now".

A task says e.g. {"relativeTime": {"from": "next Monday", "to": "next Friday"},
"expected": {"from": "{Year}-{Month0D}-{Day0D}", ...}}; the getter resolves the
relative days and fills the format placeholders, with OSWorld's calendar rules
(`desktop_env/evaluators/getters/misc.py`). "Now" is, as in current OSWorld,
the desktop's local time; `rules.timezone` overrides it; without either the
host's local time is used (OSWorld asks an IP-geolocation service for the
host's zone instead).

The task's spec is never modified: the resolved rules are a copy, so every
rollout of a task resolves against its own "now".
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cua_rl.errors import GuestError, GuestUnavailable
from cua_rl.evaluation.registry import Finding, GetterContext, getter

log = logging.getLogger(__name__)

_DOW = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


def format_day(template: str, day: datetime) -> str:
    """Fill OSWorld's placeholders (each replaced once, in OSWorld's order)."""
    replacements = (
        ("{DoW}", _DOW[day.weekday()]),
        ("{Month}", _MONTHS[day.month - 1][:3]),
        ("{DayD}", str(day.day)),
        ("{Year}", str(day.year)),
        ("{Month0D}", f"{day.month:02d}"),
        ("{month}", _MONTHS[day.month - 1].lower()),
        ("{MonthFull}", _MONTHS[day.month - 1]),
        ("{Day0D}", f"{day.day:02d}"),
        ("{MonthD}", str(day.month)),
    )
    for key, value in replacements:
        template = template.replace(key, value, 1)
    return template


def _date(now: datetime, year: int, month: int, day: int) -> datetime:
    return datetime(year, month, day, tzinfo=now.tzinfo)


def _nth_next_month(n: int) -> Callable[[datetime], datetime]:
    def resolve(now: datetime) -> datetime:
        return _date(now, now.year + (now.month == 12), now.month % 12 + 1, n)

    return resolve


def _first_monday_after(months: int, rollover_from: int) -> Callable[[datetime], datetime]:
    # OSWorld's arithmetic, kept as is (its month is `(m + k) % 12`).
    def resolve(now: datetime) -> datetime:
        year = now.year + 1 if now.month >= rollover_from else now.year
        first = _date(now, year, (now.month + months) % 12, 1)
        return first + timedelta(days=((6 - first.weekday()) + 1) % 7)

    return resolve


def _days(offset: Callable[[int], int]) -> Callable[[datetime], datetime]:
    return lambda now: now + timedelta(days=offset(now.weekday()))


_NEXT_MONDAY = _days(lambda wd: 7 - wd)
_FROM: dict[str, Callable[[datetime], datetime]] = {
    "tomorrow": _days(lambda wd: 1),
    "this month": lambda now: now,
    "5th next month": _nth_next_month(5),
    "10th next month": _nth_next_month(10),
    "this Saturday": _days(lambda wd: 5 - wd),
    "next Monday": _NEXT_MONDAY,
    "next Monday split": _NEXT_MONDAY,
    "next Friday": _days(lambda wd: 4 - wd if wd < 4 else 7 if wd == 4 else 11 - wd),
    "next Saturday": _days(lambda wd: 5 - wd if wd < 5 else 7 if wd == 5 else 6),
    "next week Friday": _days(lambda wd: 11 - wd),
    "next week Saturday": _days(lambda wd: 12 - wd),
    "next week Sunday": _days(lambda wd: 13 - wd),
    "first monday four months later": _first_monday_after(4, 9),
    "first monday eight months later": _first_monday_after(8, 5),
}


def _resolve_to(name: str, now: datetime, start: datetime, start_name: str) -> datetime:
    if name == "tomorrow":
        return now + timedelta(days=1)
    if name == "this Sunday":
        return now + timedelta(days=6 - now.weekday())
    if name == "11th next month":
        return _nth_next_month(11)(now)
    if name in ("next Friday", "next Friday split"):
        if start_name in ("next Monday", "next Monday split"):
            return start + timedelta(days=4)
        wd = now.weekday()
        return now + timedelta(days=4 - wd if wd < 4 else 11 - wd)
    if name == "next Sunday":
        if start_name in ("next Friday", "next Saturday"):
            return start + timedelta(days=6 - start.weekday())
        return now + timedelta(days=6 - now.weekday() if now.weekday() < 6 else 7)
    if name == "next week Sunday":
        if start_name in ("next week Friday", "next week Saturday"):
            return start + timedelta(days=6 - start.weekday())
        return now + timedelta(days=13 - now.weekday())
    raise ValueError(f"rule_relativeTime: unknown relative time 'to': {name!r}")


def resolve_relative_rules(rules: dict[str, Any], now: datetime) -> dict[str, Any]:
    """A copy of `rules` with its `expected` date templates filled for `now`."""
    out = copy.deepcopy(rules)
    relative, expected = out["relativeTime"], out["expected"]
    start_name = relative["from"]
    if start_name not in _FROM:
        raise ValueError(f"rule_relativeTime: unknown relative time 'from': {start_name!r}")
    start = _FROM[start_name](now)
    if "to" not in relative:
        value = expected["time"]
        expected["time"] = (
            [format_day(v, start) for v in value]
            if isinstance(value, list)
            else format_day(value, start)
        )
        return out
    if start_name == "next Monday split":
        for key in ("puDay", "puMonth", "puYear"):
            expected[key] = format_day(expected[key], start)
    else:
        expected["from"] = format_day(expected["from"], start)
    end_name = relative["to"]
    end = _resolve_to(end_name, now, start, start_name)
    if end_name == "next Friday split":
        for key in ("doDay", "doMonth", "doYear"):
            expected[key] = format_day(expected[key], end)
    else:
        expected["to"] = format_day(expected["to"], end)
    return out


_NOW_ON_DESKTOP = "from datetime import datetime; print(datetime.now().astimezone().isoformat())"


async def _now(ctx: GetterContext, rules: dict[str, Any]) -> datetime:
    zone = rules.get("timezone")
    if zone:
        try:
            return datetime.now(ZoneInfo(zone))
        except (ZoneInfoNotFoundError, ValueError):
            log.error("rule_relativeTime: unknown timezone %r; using UTC", zone)
            return datetime.now(ZoneInfo("UTC"))
    try:
        result = await ctx.client.execute(["python3", "-c", _NOW_ON_DESKTOP], timeout=15.0)
        return datetime.fromisoformat(result.output.strip().splitlines()[-1])
    except GuestUnavailable:
        raise
    except (GuestError, ValueError, IndexError) as exc:
        log.warning("rule_relativeTime: desktop time unavailable (%s); using the host's", exc)
        return datetime.now().astimezone()


def _check(config: dict[str, Any]) -> list[Finding]:
    rules = config["rules"]
    if (
        not isinstance(rules, dict)
        or not isinstance(rules.get("relativeTime"), dict)
        or not isinstance(rules.get("expected"), dict)
    ):
        return [(".rules", "an object with 'relativeTime' and 'expected' objects")]
    name = rules["relativeTime"].get("from")
    if name not in _FROM:
        return [(".rules.relativeTime.from", f"one of {sorted(_FROM)}, got {name!r}")]
    return []


@getter("rule_relativeTime", required=("rules",), check=_check)
async def rule_relative_time(ctx: GetterContext, config: dict[str, Any]) -> dict[str, Any]:
    return resolve_relative_rules(config["rules"], await _now(ctx, config["rules"]))
