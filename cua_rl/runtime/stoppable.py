"""Running a whole run's coroutine so that Ctrl-C and SIGTERM stop it cleanly.

A run (train, rollout, or a test child standing in for one) is one coroutine;
SIGTERM must unwind it exactly as Ctrl-C does, so that model servers and desktops
are stopped and the run directory stays resumable.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

from cua_rl.errors import CuaRlError

T = TypeVar("T")


class RunInterrupted(CuaRlError):
    """Ctrl-C or SIGTERM stopped the run (not a failure: the store records it so,
    `store/run_events.run_lifecycle` reads `interrupted`)."""

    interrupted = True


def run_stoppable(coro: Coroutine[Any, Any, T]) -> T:
    """asyncio.run, with SIGTERM cancelling the run like Ctrl-C does: cancellation
    unwinds every context manager, so model servers and desktops are stopped and
    everything stored so far stays usable for `--resume`."""

    async def main() -> T:
        task = asyncio.current_task()
        assert task is not None
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
        return await coro

    try:
        return asyncio.run(main())
    except (KeyboardInterrupt, asyncio.CancelledError):
        raise RunInterrupted(
            "interrupted; run the same command with --resume (train) or again (eval) to continue"
        ) from None


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within: SIGTERM raises KeyboardInterrupt, as Ctrl-C does, so the `finally`
    blocks of synchronous code run. A bench that starts a run in a session of its own
    (out of reach of the terminal's Ctrl-C) stops it in such a block; killed by the
    default SIGTERM instead, it left the run, its model servers and desktops behind."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
