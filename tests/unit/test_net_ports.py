"""The port picker and the retry of a start whose port was taken (cua_rl/net_ports.py).

Real loopback sockets: a "thief" binds the picked port between the pick and the
server's bind, as another process's socket would.
"""

from __future__ import annotations

import errno
import logging
import random
import socket
from pathlib import Path

import pytest
from tests_support.ports import listen, released

from cua_rl import net_ports
from cua_rl.errors import InferenceUnavailable, PortInUse
from cua_rl.net_ports import (
    PortReservation,
    address_in_use,
    candidate_range,
    ephemeral_range,
    on_free_port,
    on_free_port_sync,
    pick_port,
    port_taken,
    reserve_port,
)


def test_ephemeral_range_is_read_from_the_file_or_defaults(tmp_path: Path) -> None:
    good = tmp_path / "range"
    good.write_text("40000\t50000\n")
    assert ephemeral_range(good) == (40000, 50000)
    for text in ("garbage", "50000 40000", "0 10", ""):
        good.write_text(text)
        assert ephemeral_range(good) == net_ports.DEFAULT_EPHEMERAL, text
    assert ephemeral_range(tmp_path / "missing") == net_ports.DEFAULT_EPHEMERAL


def test_candidates_lie_below_the_ephemeral_range_else_above_it() -> None:
    assert candidate_range((32768, 60999)) == (20000, 32768)
    assert candidate_range((20500, 60000)) == (60001, 65536)  # too little room below
    assert candidate_range((1024, 65535)) is None  # all ports are ephemeral


def test_picks_are_free_ports_outside_the_ephemeral_range() -> None:
    low, high = ephemeral_range()
    for _ in range(20):
        with reserve_port() as reservation:
            assert not low <= reservation.port <= high
            assert reservation.port >= net_ports.FLOOR
    assert not low <= pick_port() <= high


def test_a_reserved_port_is_skipped_by_other_pickers_but_bound_by_its_server() -> None:
    first = reserve_port(rng=random.Random(7))
    try:
        again = reserve_port(rng=random.Random(7))  # same draws: the first is taken
        assert again.port != first.port
        again.release()
        with pytest.raises(OSError):  # a plain bind (no SO_REUSEADDR) is refused
            socket.socket().bind(("127.0.0.1", first.port))
        # While nothing listens, a client is refused at once (a down server fails fast).
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", first.port), timeout=2).close()
        with listen(first.port) as server:  # the child's listener shares the port
            socket.create_connection(("127.0.0.1", first.port), timeout=2).close()
            server.accept()[0].close()
        with listen(first.port):  # and again after a restart
            pass
    finally:
        first.release()
    assert released(first)
    first.release()  # idempotent


def test_a_wildcard_reservation_admits_a_wildcard_server() -> None:
    with reserve_port("0.0.0.0") as reservation, listen(reservation.port, "0.0.0.0"):
        pass


def test_the_preferred_port_is_kept_when_free_and_replaced_when_taken() -> None:
    port = pick_port()
    assert pick_port(prefer=port) == port
    with listen(port):  # someone listens there now
        other = pick_port(prefer=port)
    assert other != port


def test_avoided_ports_are_not_picked() -> None:
    rng = random.Random(3)
    first = random.Random(3).randrange(*candidate_range())  # type: ignore[misc]
    with reserve_port(avoid={first}, rng=rng) as reservation:
        assert reservation.port != first


def test_port_taken_recognises_address_in_use_and_nothing_else() -> None:
    assert port_taken(OSError(errno.EADDRINUSE, "Address already in use"))
    assert port_taken(PortInUse("127.0.0.1", 1234))
    try:
        try:
            raise PortInUse("127.0.0.1", 1234)
        except PortInUse as cause:
            raise InferenceUnavailable("model server exited") from cause
    except InferenceUnavailable as exc:
        assert port_taken(exc)
    assert not port_taken(ConnectionRefusedError(errno.ECONNREFUSED, "refused"))
    assert not port_taken(InferenceUnavailable("model server exited (1)"))
    assert "127.0.0.1:1234 is in use" in str(PortInUse("127.0.0.1", 1234))


def test_address_in_use_is_found_in_server_output() -> None:
    aiohttp = (
        "OSError: [Errno 98] error while attempting to bind on address "
        "('127.0.0.1', 20001): address already in use"
    )
    vllm = "    sock.bind(addr)\nOSError: [Errno 98] Address already in use"
    assert address_in_use(aiohttp) and address_in_use(vllm)
    assert not address_in_use("OSError: [Errno 111] Connection refused")


class Thief:
    """Binds the port of the first `times` starts before the server does."""

    def __init__(self, times: int) -> None:
        self.times = times
        self.stolen: list[int] = []
        self.socks: list[socket.socket] = []
        self.reservations: list[PortReservation] = []

    def serve(self, reservation: PortReservation) -> socket.socket:
        """What a server does with its port; the thief may have been first."""
        self.reservations.append(reservation)
        if len(self.stolen) < self.times:
            self.socks.append(listen(reservation.port))
            self.stolen.append(reservation.port)
        return listen(reservation.port)  # EADDRINUSE if stolen

    def close(self) -> None:
        for sock in self.socks:
            sock.close()


async def test_a_start_whose_port_was_taken_runs_again_on_another_port(
    caplog: pytest.LogCaptureFixture,
) -> None:
    thief = Thief(times=2)

    async def start(reservation: PortReservation) -> tuple[socket.socket, PortReservation]:
        return thief.serve(reservation), reservation

    try:
        with caplog.at_level(logging.WARNING):
            server, reservation = await on_free_port(start, "start of the test server")
        with server, reservation:
            assert reservation.port not in thief.stolen and len(thief.stolen) == 2
            assert not released(reservation)  # the started server's, until it stops
            assert all(released(r) for r in thief.reservations[:2])
        retries = [
            r.getMessage() for r in caplog.records if "start of the test server" in r.getMessage()
        ]
        assert len(retries) == 2, retries  # one line per retry
        assert "Address already in use" in retries[0] and "retry 1/4" in retries[0]
    finally:
        thief.close()


async def test_the_start_fails_once_its_attempts_are_spent() -> None:
    thief = Thief(times=10)

    async def start(reservation: PortReservation) -> socket.socket:
        return thief.serve(reservation)

    try:
        with pytest.raises(OSError) as info:
            await on_free_port(start, "start of the test server", attempts=3)
        assert info.value.errno == errno.EADDRINUSE
        assert len(thief.stolen) == 3 and len(set(thief.stolen)) == 3
        assert all(released(r) for r in thief.reservations)
    finally:
        thief.close()


async def test_other_errors_are_not_retried() -> None:
    seen: list[PortReservation] = []

    async def start(reservation: PortReservation) -> None:
        seen.append(reservation)
        raise InferenceUnavailable("model server exited (1): out of memory")

    with pytest.raises(InferenceUnavailable, match="out of memory"):
        await on_free_port(start, "start of the test server")
    assert len(seen) == 1 and released(seen[0])


async def test_the_preferred_port_is_tried_first_then_fresh_ones() -> None:
    preferred = pick_port()
    thief = Thief(times=1)

    async def start(reservation: PortReservation) -> socket.socket:
        return thief.serve(reservation)

    try:
        with await on_free_port(start, "start", prefer=preferred):
            assert thief.stolen == [preferred]
            assert thief.reservations[1].port != preferred
            thief.reservations[1].release()
    finally:
        thief.close()


def test_the_synchronous_start_retries_the_same_way(caplog: pytest.LogCaptureFixture) -> None:
    thief = Thief(times=1)
    try:
        with caplog.at_level(logging.WARNING):
            server = on_free_port_sync(thief.serve, "start of the sync server")
        with server:
            assert server.getsockname()[1] != thief.stolen[0]
        assert released(thief.reservations[0])
        thief.reservations[1].release()
        assert [r for r in caplog.records if "start of the sync server" in r.getMessage()]
    finally:
        thief.close()
