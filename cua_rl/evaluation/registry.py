"""Registries of evaluator getters and metrics, and the structural check of a spec.

OSWorld resolves `func` and `result.type` names with `getattr` on two modules,
so a typo surfaces only when a task is scored. Here both are registries keyed by
name (`@metric("exact_match")`, `@getter("vm_file")`) that users extend from
their own modules, and `check_evaluator_spec` checks a whole spec against them
before any desktop is touched: structural mistakes become `errors` (each names
the JSON path and what was expected), names nobody registered become
`unimplemented` (a coverage gap, not a malformed file).

Metrics are plain sync functions `(result, expected?, **options) -> float`
(they parse files, so `evaluate` runs them in a thread); getters are async
`(ctx: GetterContext, config: dict) -> Any` (they talk to the desktop).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cua_rl.desktop.client import GuestClient
    from cua_rl.desktop.file_cache import FileCache
    from cua_rl.desktop.setup_context import SetupContext

Finding = tuple[str, str]
"""(JSON sub-path such as `.rules[0].type`, what was expected there)."""

OptionsCheck = Callable[[Mapping[str, Any]], tuple[list[Finding], list[str]]]
"""Deeper check of a metric's options: (errors, unimplemented feature names)."""

ConfigCheck = Callable[[Mapping[str, Any]], list[Finding]]


@dataclass(frozen=True, slots=True)
class GetterContext:
    """What a getter may use: the desktop, the host download cache and the
    per-trajectory folder where fetched files land under their `dest` name."""

    client: GuestClient
    cache: FileCache
    cache_dir: Path
    task_id: str = ""
    setup: SetupContext | None = None


Metric = Callable[..., float]
Getter = Callable[[GetterContext, dict[str, Any]], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class MetricSpec:
    name: str
    func: Metric
    check_options: OptionsCheck | None = None
    signature: inspect.Signature | None = None


@dataclass(frozen=True, slots=True)
class GetterSpec:
    name: str
    func: Getter
    required: tuple[str, ...] = ()
    """Keys the config must have (besides `type`)."""
    check: ConfigCheck | None = None


METRICS: dict[str, MetricSpec] = {}
GETTERS: dict[str, GetterSpec] = {}


def metric(name: str, *, check_options: OptionsCheck | None = None) -> Callable[[Metric], Metric]:
    """Register (or replace) the metric `name`; the function is returned unchanged."""

    def add(func: Metric) -> Metric:
        METRICS[name] = MetricSpec(name, func, check_options, inspect.signature(func))
        return func

    return add


def getter(
    name: str, *, required: tuple[str, ...] = (), check: ConfigCheck | None = None
) -> Callable[[Getter], Getter]:
    """Register (or replace) the getter `name` (OSWorld's `result.type`)."""

    def add(func: Getter) -> Getter:
        GETTERS[name] = GetterSpec(name, func, required, check)
        return func

    return add


def get_metric(name: str) -> MetricSpec:
    try:
        return METRICS[name]
    except KeyError:
        raise KeyError(f"no metric named {name!r} is registered") from None


def get_getter(name: str) -> GetterSpec:
    try:
        return GETTERS[name]
    except KeyError:
        raise KeyError(f"no getter named {name!r} is registered") from None


def metric_names() -> list[str]:
    return sorted(METRICS)


def getter_names() -> list[str]:
    return sorted(GETTERS)


# checking a spec ------------------------------------------------------------------

_SPEC_KEYS = frozenset({"func", "conj", "result", "expected", "options", "postconfig"})


@dataclass
class SpecReport:
    """Outcome of `check_evaluator_spec`."""

    errors: list[str] = field(default_factory=list)
    """Malformed structure; each line is `<where><json path>: expected ...`."""
    unimplemented: list[str] = field(default_factory=list)
    """Metric/getter names (or `metric(feature)`) used but not registered."""

    @property
    def ok(self) -> bool:
        return not self.errors and not self.unimplemented


def _type(value: Any) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), "number" if isinstance(value, int | float) else "?")


class _Checker:
    def __init__(self, where: str) -> None:
        self.where = where
        self.report = SpecReport()

    def error(self, path: str, expected: str) -> None:
        self.report.errors.append(f"{self.where}{path}: expected {expected}")

    def missing(self, name: str) -> None:
        if name not in self.report.unimplemented:
            self.report.unimplemented.append(name)


def _aligned(
    chk: _Checker, spec: Mapping[str, Any], key: str, n: int | None, *, nullable: bool
) -> list[Any]:
    """The per-metric entries of `key` (a single value, or a list aligned with func)."""
    value = spec.get(key)
    if isinstance(value, list | dict) and len(value) == 0:
        value = None  # OSWorld treats an absent or empty entry as "none given"
    if n is None:
        if isinstance(value, list):
            chk.error(f".{key}", "an object (func is a single metric name), got array")
            return [None]
        return [value]
    if value is None:
        return [None] * n
    if not isinstance(value, list):
        chk.error(f".{key}", f"an array of {n} entries aligned with func, got {_type(value)}")
        return [None] * n
    if len(value) != n:
        chk.error(f".{key}", f"an array of {n} entries aligned with func, got {len(value)}")
        return (list(value) + [None] * n)[:n]
    if not nullable:
        for i, item in enumerate(value):
            if item is None:
                chk.error(f".{key}[{i}]", "an object, got null")
    return list(value)


def _check_getter(chk: _Checker, path: str, config: Any) -> None:
    if not isinstance(config, Mapping):
        chk.error(path, f"a getter object with a 'type', got {_type(config)}")
        return
    kind = config.get("type")
    if not isinstance(kind, str) or not kind:
        chk.error(f"{path}.type", f"a getter type name, got {_type(kind)}")
        return
    spec = GETTERS.get(kind)
    if spec is None:
        chk.missing(kind)
        return
    for key in spec.required:
        if key not in config:
            chk.error(f"{path}.{key}", f"a value (getter {kind!r} requires '{key}')")
    if spec.check is not None and not any(k not in config for k in spec.required):
        for sub, expected in spec.check(config):
            chk.error(f"{path}{sub}", expected)


def _positional_fits(sig: inspect.Signature, count: int) -> bool:
    """Whether `count` positional arguments (result[, expected]) fit the metric."""
    positional = [
        p for p in sig.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    if any(p.kind is p.VAR_POSITIONAL for p in sig.parameters.values()):
        return True
    required = sum(1 for p in positional if p.default is p.empty)
    return required <= count <= len(positional)


def _check_call(chk: _Checker, path: str, name: str, has_expected: bool, options: Any) -> None:
    """Options must fit the metric's signature the way evaluate() will call it."""
    spec = METRICS.get(name)
    if spec is None:
        chk.missing(name)
        return
    if options is not None and not isinstance(options, Mapping):
        chk.error(f".options{path}", f"an object of options for {name!r}, got {_type(options)}")
        return
    options = dict(options or {})
    args = ("result", "expected") if has_expected else ("result",)
    if spec.signature is not None:
        params = ", ".join(spec.signature.parameters)
        if not _positional_fits(spec.signature, len(args)):
            wanted = "no 'expected' getter" if has_expected else "an 'expected' getter"
            chk.error(
                f".expected{path}",
                f"{wanted}: metric {name!r}({params}) cannot be "
                f"called as {name}({', '.join(args)})",
            )
            return
        try:
            spec.signature.bind(*args, **options)
        except TypeError as exc:
            chk.error(
                f".options{path}" if options else f".func{path}",
                f"options that fit metric {name!r}({params}): {exc}",
            )
            return
    if spec.check_options is not None:
        errors, features = spec.check_options(options)
        for sub, expected in errors:
            chk.error(f".options{path}{sub}", expected)
        for feature in features:
            chk.missing(f"{name}({feature})")


def check_evaluator_spec(spec: dict, where: str) -> SpecReport:
    """Check an OSWorld evaluator spec without a desktop.

    `where` prefixes every message and should end in the spec's JSON path, e.g.
    `examples/os/abc.json: $.evaluator`; sub-paths are appended to it.
    """
    chk = _Checker(where)
    if not isinstance(spec, Mapping):
        chk.error("", f"an evaluator object, got {_type(spec)}")
        return chk.report
    for key in spec:
        if key not in _SPEC_KEYS and not str(key).startswith("_"):
            chk.error(
                f".{key}", f"one of {sorted(_SPEC_KEYS)} (keys starting with '_' are comments)"
            )
    func = spec.get("func")
    if isinstance(func, str) and func:
        names, n = [func], None
    elif isinstance(func, list) and func and all(isinstance(f, str) and f for f in func):
        names, n = list(func), len(func)
    else:
        chk.error(".func", f"a metric name or a non-empty array of them, got {_type(func)}")
        return chk.report
    conj = spec.get("conj", "and")
    if conj not in ("and", "or"):
        chk.error(".conj", f"'and' or 'or', got {conj!r}")
    if "postconfig" in spec and not isinstance(spec["postconfig"], list):
        chk.error(".postconfig", f"an array of setup steps, got {_type(spec['postconfig'])}")
    if names == ["infeasible"] and n is None:
        return chk.report  # scored from the agent's last action alone
    if "infeasible" in names:
        chk.error(".func", "'infeasible' alone (it cannot be combined with other metrics)")
    results = _aligned(chk, spec, "result", n, nullable=False)
    expecteds = _aligned(chk, spec, "expected", n, nullable=True)
    options = _aligned(chk, spec, "options", n, nullable=True)
    for i, name in enumerate(names):
        at = "" if n is None else f"[{i}]"
        if results[i] is None:
            chk.error(f".result{at}", f"a getter object for metric {name!r}")
        else:
            _check_getter(chk, f".result{at}", results[i])
        if expecteds[i] is not None:
            _check_getter(chk, f".expected{at}", expecteds[i])
        _check_call(chk, at, name, expecteds[i] is not None, options[i])
    return chk.report
