"""What a dry run and a real launch have in common: launch records made comparable,
vLLM's interpreter as the launch resolves it, the desktops' summary (kept apart from
runtime/launch_plan.py so the Ray dry run shares them without an import cycle)."""

from __future__ import annotations

import json
import re
from typing import Any

from cua_rl.config import RunConfig
from cua_rl.errors import ConfigError
from cua_rl.inference.owner_watch import OWNER_ENV
from cua_rl.learner.rank_process import FD_ENV
from cua_rl.runtime.desktop_needs import desktop_needs

PORT = "<port>"
PID = "<driver pid>"
FD = "<fd>"
VLLM_PYTHON = "<vLLM interpreter: ./setup.sh --vllm, or the pool's python>"
_PORT_JSON = re.compile(r'"port": ?\d+')


def normalized(record: dict[str, Any]) -> dict[str, Any]:
    """A launch record (`ProcessLaunch.as_dict`) without what only a start decides: the
    port (`--port N`, or in a vLLM replica's JSON), the driver's pid, a rank's descriptor."""
    argv = list(record.get("argv", []))
    for i, arg in enumerate(argv):
        if i and argv[i - 1] == "--port":
            argv[i] = PORT
        elif arg.startswith("{") and '"port"' in arg:
            argv[i] = _PORT_JSON.sub(f'"port": "{PORT}"', json.dumps(json.loads(arg)))
    env = dict(record.get("env", {}))
    for key, value in ((OWNER_ENV, PID), (FD_ENV, FD)):
        if key in env:
            env[key] = value
    return {**record, "argv": argv, "env": env}


def vllm_python(configured: str | None) -> str:
    """vLLM's interpreter as the launch resolves it, or a placeholder where this machine
    has none (a dry run on a laptop of a GPU node's launch)."""
    from cua_rl.inference.vllm_engine import resolve_vllm_python

    try:
        return resolve_vllm_python(configured)
    except ConfigError:
        return VLLM_PYTHON


def desktops_summary(cfg: RunConfig, where: str) -> dict[str, Any]:
    """The run's desktops: provider, count, where they run and what each needs."""
    return {"where": where, **desktop_needs(cfg).as_dict()}
