"""The driver's `ReplicaHandle` over a replica actor (`ray.inference: ray`).

A `ReplicaSet` supervises a replica through a handle: `alive()` (synchronous, asked
on every probe and every supervisor round), `restart()` and `stop()`. A replica actor
answers these remotely (`ModelReplica.alive/restart/stop`), so this handle turns the
remote calls into the protocol:

- `alive()` returns the last answer of the actor and asks again in the background
  (one call in flight at most). A crashed server is then seen by the first
  supervisor round after the probe that took it out, and restarted at once, instead
  of after `unresponsive_after_s` of silence (the only way a handle that always said
  True could get it restarted). A call that times out leaves the last answer alone
  (a busy actor is not a dead server: `/health` probes and `unresponsive_after_s`
  decide then); a call that fails (the actor itself died) reads as "not alive", so the
  set goes straight to a restart, which fails with Ray's reason.
- `restart()` waits for the actor's restart, bounded by the server's ready timeout
  plus the stop grace, and raises when the actor is dead (Ray does not restart
  replica actors), when it does not answer in time, or when the server came back on
  another URL: each counts as a failed restart, so the set retries with backoff and
  finally marks the replica FAILED with that reason.
- An answer of `alive()` asked before a restart finished is discarded, so it cannot
  send the freshly restarted replica into another restart.

Works with anything whose `handle.method.remote(...)` is awaitable (an actor handle,
or an in-process stand-in in unit tests).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from cua_rl.errors import InferenceUnavailable

log = logging.getLogger(__name__)

STOP_GRACE_S = 30.0
"""What a restart may take beyond the server's ready timeout: stopping what is left
(SIGTERM, then SIGKILL, 5 s each) and the calls to the actor."""


class RemoteReplica:
    """`ReplicaHandle` for one replica actor serving at `url` (see module doc)."""

    def __init__(
        self, actor: Any, url: str, *, restart_timeout_s: float, check_timeout_s: float = 10.0
    ) -> None:
        self.actor = actor
        self.url = url.rstrip("/")
        self.restart_timeout_s = restart_timeout_s
        self.check_timeout_s = check_timeout_s
        self._alive = True
        self._generation = 0
        """Bumped by every restart; answers asked in an older generation are stale."""
        self._check: asyncio.Task[None] | None = None

    def alive(self) -> bool:
        """The actor's last answer (True until it says otherwise); asks again."""
        self._ask_again()
        return self._alive

    def _ask_again(self) -> None:
        if self._check is not None and not self._check.done():
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop, no background call: the last answer stands
            return
        self._check = loop.create_task(self._ask(self._generation), name=f"alive? {self.url}")

    async def _ask(self, generation: int) -> None:
        try:
            alive = bool(await asyncio.wait_for(self._call("alive"), self.check_timeout_s))
        except TimeoutError:
            return  # busy, not necessarily dead: the health probes decide
        except Exception as exc:  # noqa: BLE001 - the actor is gone (RayActorError, ...)
            log.warning("replica actor of %s did not answer: %s", self.url, exc)
            alive = False
        if generation == self._generation:
            self._alive = alive

    async def restart(self) -> None:
        """Restart the server through its actor (raises on failure; see module doc)."""
        try:
            url = await asyncio.wait_for(self._call("restart"), self.restart_timeout_s)
        except TimeoutError:
            raise InferenceUnavailable(
                f"replica actor of {self.url} did not restart its server within "
                f"{self.restart_timeout_s:g} s"
            ) from None
        self._generation += 1
        if str(url).rstrip("/") != self.url:
            self._alive = False
            raise InferenceUnavailable(
                f"replica {self.url} came back on {url}: a replica's "
                "URL is its identity in routing, it cannot move"
            )
        self._alive = True

    async def close(self) -> None:
        """End the background `alive` call, if any (the server is left as it is)."""
        if self._check is not None:
            self._check.cancel()
            await asyncio.gather(self._check, return_exceptions=True)

    async def stop(self) -> None:
        """Stop the server (the actor itself is the caller's to kill)."""
        await self.close()
        await self._call("stop")

    async def _call(self, method: str) -> Any:
        return await getattr(self.actor, method).remote()
