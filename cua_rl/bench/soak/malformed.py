"""The soak's `malformed_answer` fault: a replica's next chat answers come back
malformed (status 200, JSON of the wrong shape: no choice), through the fault proxy.

`bench faults` puts its proxy in front of a server it runs itself and gives the run
that URL (`policy.urls`), which takes the server out of the run's supervision; a soak
must keep its replicas supervised (their kills and hangs are faults of their own). So
the soak's proxy is a forward proxy: the run's model clients send their chat requests
through it (`CUA_RL_MODEL_PROXY`, inference/client.py) to the replicas the run started,
and a fault arms it for one replica's port (`FaultProxy.arm(..., ports=...)`).

A malformed answer is the model's, not the replica's fault: the client raises
`ModelResponseError`, which is never retried and takes no replica down; a policy
request's episode aborts with one line, a reward-model request's step keeps no verdict
(`judge_failures`). Recovered: every armed request was answered malformed, a later
chat request to that replica was answered well, and the run made progress.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from cua_rl.bench.faults.proxy import FaultProxy

MALFORMED = "malformed_answer"
ANSWERS = 3
"""Chat requests of the victim replica answered malformed, in a row."""
ROLES = ("policy", "prm")

Victims = Callable[[str], list[tuple[int, int | None]]]
"""A role's live replicas in the run: (pid, port) each."""


class MalformedAnswers:
    """Arms the proxy for one replica at a time and says when that fault recovered."""

    def __init__(self, proxy: FaultProxy) -> None:
        self.proxy = proxy

    def arm(self, victims: Victims, rng: random.Random) -> dict[str, Any] | None:
        """Arm the proxy for a replica drawn from both pools' live ones; what it
        chose (`pid`, `port`, `role`), or None when no replica serves now."""
        candidates = sorted(
            (pid, port, role) for role in ROLES for pid, port in victims(role) if port is not None
        )
        if not candidates:
            return None
        pid, port, role = rng.choice(candidates)
        self.proxy.arm("malformed", ANSWERS, ports=[port])
        return {"pid": pid, "port": port, "role": role}

    def follow(self, extra: dict[str, Any], victims: Victims) -> None:
        """Keep a fault not yet served aimed at its role: a resumed run serves the
        role on new ports."""
        if self.proxy.served_all:
            return
        ports = sorted(port for _, port in victims(extra["role"]) if port is not None)
        if ports and extra["port"] not in ports and ports != extra.get("retargeted"):
            self.proxy.retarget(ports)
            extra["retargeted"] = ports

    def answered_well(self) -> bool:
        """Every armed request was answered malformed and a later one well."""
        return self.proxy.served_all and self.proxy.first_good_after is not None

    def figures(self) -> dict[str, Any]:
        return {
            "answered_malformed": self.proxy.injected,
            "requests_forwarded": self.proxy.forwarded,
        }
