"""Which GPUs this machine offers a run, without importing torch or starting CUDA.

A run decides which process gets which device before any of them starts
(runtime/devices.py), so the list must come from what the driver can see without
initialising CUDA in its own process: `CUDA_VISIBLE_DEVICES` when the user set it
(the run then hands out those devices only), else the NVIDIA device nodes
(`/dev/nvidia0`, `/dev/nvidia1`, ...). The ids are what a child's
`CUDA_VISIBLE_DEVICES` names: physical indexes (or GPU UUIDs, when the user's list
holds them).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

VISIBLE_ENV = "CUDA_VISIBLE_DEVICES"
_DEVICE_NODE = re.compile(r"^nvidia(\d+)$")


def visible_gpus(environ: Mapping[str, str] | None = None, dev: Path = Path("/dev")) -> list[str]:
    """The GPU ids this process may hand out, in order."""
    env = os.environ if environ is None else environ
    if VISIBLE_ENV in env:
        listed = [p.strip() for p in env[VISIBLE_ENV].split(",") if p.strip()]
        if listed and listed[0] in ("-1", "none", "NoDevFiles"):
            return []
        return listed
    try:
        names = [p.name for p in dev.iterdir()]
    except OSError:
        return []
    indexes = sorted(int(m.group(1)) for n in names if (m := _DEVICE_NODE.match(n)))
    return [str(i) for i in indexes]
