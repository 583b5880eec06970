"""OSWorld-compatible evaluation: getters, metrics and `evaluate` (data contracts:
docs/architecture.md).

Importing the package registers every built-in getter and metric; format
libraries (the `eval` extra) are imported only inside metric bodies, so this
import stays cheap and works on a core install.

Scores follow OSWorld's current evaluators; every place where we differ on
purpose (and why, and the test that pins it) is listed in
docs/evaluation-deviations.md.
"""

from cua_rl.evaluation import getters, metrics
from cua_rl.evaluation.evaluate import declared_failure, evaluate
from cua_rl.evaluation.registry import (
    GETTERS,
    METRICS,
    GetterContext,
    SpecReport,
    check_evaluator_spec,
    get_getter,
    get_metric,
    getter,
    getter_names,
    metric,
    metric_names,
)

__all__ = [
    "GETTERS",
    "METRICS",
    "GetterContext",
    "SpecReport",
    "check_evaluator_spec",
    "declared_failure",
    "evaluate",
    "get_getter",
    "get_metric",
    "getter",
    "getter_names",
    "getters",
    "metric",
    "metric_names",
    "metrics",
]
