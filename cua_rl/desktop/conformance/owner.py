"""The owner process of `check_provider`'s cleanup check:
`python -m cua_rl.desktop.conformance.owner MODULE:CLASS CONFIG_JSON DESKTOP_ID`.

It builds the provider from its class and config, binds it to itself
(`owner_pid`), starts one desktop, prints its handle as one JSON line (after
`HANDLE_PREFIX`) and waits to be killed. Every process it starts inherits the
check's mark in its environment (`MARK_ENV`), which is how the check finds what
outlived it.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import sys
from typing import Any

MARK_ENV = "CUA_RL_CHECK_MARK"
HANDLE_PREFIX = "cua-rl-check-handle "
"""Starts the stdout line that carries the handle (a provider may print too)."""
WAIT_S = 900.0
"""How long the owner waits to be killed before it exits on its own (bounded)."""


def build(spec: str, config_json: str) -> Any:
    """The provider of class `spec` (module:qualname) with its config from JSON."""
    module, _, name = spec.partition(":")
    cls = getattr(importlib.import_module(module), name)
    config_type = getattr(cls, "config_type", None)
    if config_type is None:
        from pydantic import TypeAdapter

        from cua_rl.desktop.providers.config import ProviderConfig

        config = TypeAdapter(ProviderConfig).validate_json(config_json)
    else:
        config = config_type.model_validate_json(config_json)
    return cls(config)


async def _main(spec: str, config_json: str, desktop_id: str) -> None:
    provider = build(spec, config_json)
    provider.owner_pid = os.getpid()
    handle = await provider.start(desktop_id)
    print(
        HANDLE_PREFIX
        + json.dumps(
            {
                "id": handle.id,
                "url": handle.url,
                "token": handle.token,
                "provider": handle.provider,
                "info": handle.info,
                "tls_fingerprint": handle.tls_fingerprint,
                "tls_ca_file": handle.tls_ca_file,
            },
            default=str,
        ),
        flush=True,
    )
    await asyncio.sleep(WAIT_S)


if __name__ == "__main__":
    asyncio.run(_main(*sys.argv[1:4]))
