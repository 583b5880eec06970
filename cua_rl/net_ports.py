"""Picking TCP ports for servers we start, so that a port stolen in between costs a retry.

A server started as a child process (a model replica, a desktop's forwarder) is told
its port before it binds it, so the number is picked first and bound later. The old
way (bind port 0, close, hand the number over) draws from the kernel's ephemeral range
(`ip_local_port_range`), the range every outgoing connection's local port also comes
from: in a run with hundreds of connections one of them can take the number in that
window ("address already in use" at the child's bind). Here:

- Ports come from below the ephemeral range (20000 up to its start: above the
  well-known services and Ray's worker ports 10002-19999), where only explicit
  binds compete, never an outgoing connection.
- The pick is a `PortReservation`: the socket that proved the port free stays bound
  (not listening) until released. It was bound without SO_REUSEADDR, so no other
  picker (ours, in any process) sees the port as free; it then sets SO_REUSEADDR, so
  the child's server socket (aiohttp, vLLM and our forwarders all bind with
  SO_REUSEADDR) binds and listens beside it. While the child is down the port still
  refuses connections (nothing listens), so a dead server fails fast as before.
- What a reservation cannot stop (a program binding that exact port with SO_REUSEADDR)
  is caught by `on_free_port`: a start that fails because the port is in use
  (`port_taken`) is run again on a fresh port, a bounded number of times, with one
  log line per retry.

A bind done in-process right away needs none of this: bind port 0 and read the port
back (no window at all).
"""

from __future__ import annotations

import errno
import logging
import random
import socket
from collections.abc import Awaitable, Callable, Collection
from pathlib import Path
from typing import TypeVar

from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt

from cua_rl.errors import PortInUse
from cua_rl.retry import retrying

log = logging.getLogger(__name__)

T = TypeVar("T")

PORT_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
DEFAULT_EPHEMERAL = (32768, 60999)
"""Linux's default ephemeral range, used when the file above cannot be read."""
FLOOR = 20000
"""Lowest port picked: below it live well-known services (8000, 9222, ...) and Ray's
worker ports (10002-19999 by default)."""
MIN_SPAN = 1000
"""A candidate range narrower than this is not used (too crowded to pick from)."""
START_ATTEMPTS = 5
"""Starts tried on fresh ports before a stolen port fails the start."""
_PICK_TRIES = 200


def ephemeral_range(path: Path = PORT_RANGE_FILE) -> tuple[int, int]:
    """The kernel's ephemeral port range (inclusive); Linux's default if unreadable."""
    try:
        low, high = (int(x) for x in path.read_text().split()[:2])
    except (OSError, ValueError):
        return DEFAULT_EPHEMERAL
    if not 1 <= low <= high <= 65535:
        return DEFAULT_EPHEMERAL
    return low, high


def candidate_range(ephemeral: tuple[int, int] | None = None) -> tuple[int, int] | None:
    """Ports to pick from (half-open) outside the ephemeral range: below it from
    `FLOOR`, else above it; None when neither leaves `MIN_SPAN` ports (then only the
    kernel's own pick is left, and the retry is the only guard)."""
    low, high = ephemeral or ephemeral_range()
    if low - FLOOR >= MIN_SPAN:
        return FLOOR, low
    if 65536 - (high + 1) >= MIN_SPAN:
        return high + 1, 65536
    return None


class PortReservation:
    """A port held bound (not listening) by this process until `release` (see module
    doc): other pickers skip it, a server socket with SO_REUSEADDR can still take it."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        address = sock.getsockname()
        self.host: str = address[0]
        self.port: int = address[1]

    def release(self) -> None:
        """Let the port go (idempotent)."""
        self._sock.close()

    def __enter__(self) -> PortReservation:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"PortReservation({self.host}:{self.port})"


def _bind(host: str, port: int, *, exclusive: bool) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        if not exclusive:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        # After the bind: the bind itself was exclusive (another reservation, a
        # listener or a TIME_WAIT connection on the port made it fail), from now on
        # the child's SO_REUSEADDR server socket may share the port with us.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    except BaseException:
        sock.close()
        raise
    return sock


def reserve_port(
    host: str = "127.0.0.1",
    *,
    prefer: int | None = None,
    avoid: Collection[int] = (),
    ephemeral: tuple[int, int] | None = None,
    rng: random.Random | None = None,
) -> PortReservation:
    """Reserve a port on `host` for a server to bind later.

    `prefer` (a server's previous port, e.g. a desktop being reset) is taken when it
    can be bound with SO_REUSEADDR (its own closing connections do not count);
    otherwise, and without it, a random free port outside the ephemeral range (see
    `candidate_range`), none of `avoid`, drawn from `rng` (default: the module's
    generator). OSError if there is none.
    """
    if prefer:
        try:
            return PortReservation(_bind(host, prefer, exclusive=False))
        except OSError:
            log.info("preferred port %s:%d is taken; picking another", host, prefer)
    span = candidate_range(ephemeral)
    if span is None:  # no room outside the ephemeral range: the kernel's pick
        return PortReservation(_bind(host, 0, exclusive=True))
    for _ in range(_PICK_TRIES):
        port = (rng or random).randrange(*span)
        if port in avoid:
            continue
        try:
            return PortReservation(_bind(host, port, exclusive=True))
        except OSError as exc:
            if exc.errno not in (errno.EADDRINUSE, errno.EACCES):
                raise
    raise OSError(
        errno.EADDRINUSE,
        f"no free port on {host} in {span[0]}..{span[1] - 1} after {_PICK_TRIES} tries",
    )


def pick_port(
    host: str = "127.0.0.1", *, prefer: int | None = None, avoid: Collection[int] = ()
) -> int:
    """A port number for a caller that cannot hold a reservation (the port is free now,
    outside the ephemeral range; nothing keeps it free: retry on `port_taken`)."""
    with reserve_port(host, prefer=prefer, avoid=avoid) as reservation:
        return reservation.port


ADDRESS_IN_USE = "address already in use"
"""How every server we start says it (aiohttp, vLLM, ZMQ), in any case."""


def address_in_use(text: str) -> bool:
    """True if a server's output says a bind failed because the address was in use."""
    return ADDRESS_IN_USE in text.lower()


def port_taken(exc: BaseException) -> bool:
    """True if `exc`, or an error it was raised from, says a port was in use."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, PortInUse):
            return True
        if isinstance(current, OSError) and current.errno == errno.EADDRINUSE:
            return True
        current = current.__cause__
    return False


async def on_free_port(
    start: Callable[[PortReservation], Awaitable[T]],
    what: str,
    *,
    host: str = "127.0.0.1",
    prefer: int | None = None,
    avoid: Collection[int] = (),
    attempts: int = START_ATTEMPTS,
) -> T:
    """`start(reservation)` on a reserved port; run again on a fresh port while it fails
    with `port_taken` (at most `attempts` runs, one log line per retry).

    On success the reservation belongs to what `start` made (release it when that
    stops); on any failure it is released here. `prefer` is tried on the first run only.
    """
    tried: list[int] = []
    async for attempt in retrying(
        what, attempts=attempts, retry_on=port_taken, delay=lambda _i: 0.0
    ):
        with attempt:
            reservation = reserve_port(
                host, prefer=None if tried else prefer, avoid={*avoid, *tried}
            )
            tried.append(reservation.port)
            try:
                return await start(reservation)
            except BaseException:
                reservation.release()
                raise
    raise AssertionError("unreachable: retrying re-raises the last error")


def on_free_port_sync(
    start: Callable[[PortReservation], T],
    what: str,
    *,
    host: str = "127.0.0.1",
    attempts: int = START_ATTEMPTS,
) -> T:
    """`on_free_port` for synchronous callers (same policy, same log line)."""
    tried: list[int] = []

    def once() -> T:
        reservation = reserve_port(host, avoid=tried)
        tried.append(reservation.port)
        try:
            return start(reservation)
        except BaseException:
            reservation.release()
            raise

    def before_sleep(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        log.warning(
            "%s failed (%s); retry %d/%d on another port",
            what,
            exc,
            state.attempt_number,
            attempts - 1,
        )

    retrying_sync = Retrying(
        stop=stop_after_attempt(attempts),
        retry=retry_if_exception(port_taken),
        before_sleep=before_sleep,
        reraise=True,
    )
    return retrying_sync(once)
