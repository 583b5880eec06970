"""Host side of desktops: the guest-protocol client, providers, the pool and task setup steps.

`check_provider` (the provider conformance check, docs/providers.md) is imported on
first use, so importing this package stays cheap."""

from __future__ import annotations

from typing import Any

__all__ = ["check_provider"]


def __getattr__(name: str) -> Any:
    if name == "check_provider":
        from cua_rl.desktop.conformance import check_provider

        return check_provider
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
