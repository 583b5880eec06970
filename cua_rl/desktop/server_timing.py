"""Reading our guest's `Server-Timing` header: where a screenshot's time went inside
the guest (the grab and the encode), beside the round trip the host measures."""

from __future__ import annotations

from typing import Any


def server_timing(headers: Any) -> dict[str, float]:
    """`Server-Timing: grab;dur=2.1, encode;dur=4.3` plus `X-Cua-Encoder: turbo` as
    {"grab": 2.1, "encode": 4.3, "encoder_turbo": 0.0}; what does not parse is left out
    (the header is information, never trusted for control)."""
    out: dict[str, float] = {}
    for part in str(headers.get("Server-Timing", ""))[:512].split(","):
        name, _, rest = part.strip().partition(";")
        if not name.isidentifier():
            continue
        for param in rest.split(";"):
            key, _, value = param.strip().partition("=")
            if key == "dur":
                try:
                    out[name] = float(value)
                except ValueError:
                    pass
    encoder = str(headers.get("X-Cua-Encoder", ""))[:32]
    if encoder.isidentifier():
        out[f"encoder_{encoder}"] = 0.0
    return out
