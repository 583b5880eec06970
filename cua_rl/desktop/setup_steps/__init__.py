"""OSWorld's task setup steps (`config` entries of a task), run against a guest.

`core` holds the runner, the registry and the steps every desktop has; `chrome`
adds the Chrome/CDP steps. Importing this package registers both, here and not by
a side-effect import at the bottom of a module.
"""

from cua_rl.desktop.setup_context import SetupContext
from cua_rl.desktop.setup_steps import chrome as _chrome  # noqa: F401  (registers its steps)
from cua_rl.desktop.setup_steps.core import (
    SETUP_STEPS,
    StepRun,
    StepSpec,
    parse_setup_step,
    register_setup_step,
    run_setup_steps,
    substitute_placeholders,
    validate_setup_steps,
)

__all__ = [
    "SETUP_STEPS",
    "SetupContext",
    "StepRun",
    "StepSpec",
    "parse_setup_step",
    "register_setup_step",
    "run_setup_steps",
    "substitute_placeholders",
    "validate_setup_steps",
]
