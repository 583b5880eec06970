"""Taking a picked port away, as another program would, for port-race tests; whether a
reservation still holds its port."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

from cua_rl.net_ports import PortReservation


def listen(port: int, host: str = "127.0.0.1") -> socket.socket:
    """Another program's server on `port` (SO_REUSEADDR, as servers bind)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen()
    except BaseException:
        sock.close()
        raise
    return sock


def released(reservation: PortReservation) -> bool:
    """Whether `reservation` let its port go (`release`, or the server that took it
    over stopped): its socket is closed."""
    return reservation._sock.fileno() == -1


class PortThief:
    """Listens on the next ports a picker reserves, right after the pick: the one
    kind of socket a reservation cannot keep out (net_ports.py), so the server's own
    bind fails with "address already in use"."""

    def __init__(self) -> None:
        self.stolen: list[int] = []
        self._budget = 0
        self._socks: list[socket.socket] = []

    def arm(self, times: int = 1) -> list[int]:
        """Steal the next `times` picks; returns the list of stolen ports."""
        self._budget += times
        return self.stolen

    def wrap(self, reserve: Callable[..., PortReservation]) -> Callable[..., PortReservation]:
        """`reserve` (net_ports.reserve_port as a module imported it), stealing when armed."""

        def reserve_and_steal(*args: Any, **kwargs: Any) -> PortReservation:
            reservation = reserve(*args, **kwargs)
            if self._budget:
                self._budget -= 1
                self._socks.append(listen(reservation.port, reservation.host))
                self.stolen.append(reservation.port)
            return reservation

        return reserve_and_steal

    def close(self) -> None:
        for sock in self._socks:
            sock.close()
