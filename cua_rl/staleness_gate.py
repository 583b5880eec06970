"""The staleness gate between the learners and the serving policy.

The fleet waits on it before a rollout starts and the learner service moves it
after each update, so it sits below both (docs/architecture.md, "Layers"): neither
the rollout nor the learner package has to import the other for it.
"""

from __future__ import annotations

import asyncio
from typing import Protocol, runtime_checkable


@runtime_checkable
class Gate(Protocol):
    """What the fleet, the learner and the training loop use of a version gate:
    a `VersionGate` in this process or `runtime.ray.services.RemoteGate`, which
    speaks to one in another process with the same methods."""

    eta: int
    learner_version: int
    serving_version: int

    def fresh(self, version: int) -> bool: ...

    async def wait_fresh(self) -> int: ...

    async def set_versions(
        self, *, learner: int | None = None, serving: int | None = None
    ) -> None: ...


class VersionGate:
    """Staleness control between the learner and the serving policy.

    A rollout may start only while `serving >= learner - eta`; samples whose
    policy version is older than `learner - eta` when consumed are stale.
    """

    def __init__(self, eta: int = 2) -> None:
        self.eta = eta
        self.learner_version = 0
        self.serving_version = 0
        self._changed = asyncio.Condition()

    def fresh(self, version: int) -> bool:
        return version >= self.learner_version - self.eta

    async def wait_fresh(self) -> int:
        """Block until the serving version may start a rollout; return it."""
        async with self._changed:
            await self._changed.wait_for(lambda: self.fresh(self.serving_version))
            return self.serving_version

    async def set_versions(self, *, learner: int | None = None, serving: int | None = None) -> None:
        async with self._changed:
            if learner is not None:
                self.learner_version = learner
            if serving is not None:
                self.serving_version = serving
            self._changed.notify_all()
