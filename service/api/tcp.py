"""The HTTP protocol the API is served with: uvicorn's h11 protocol with Nagle's algorithm off on every connection.

asyncio turns ``TCP_NODELAY`` on for a connection only when its listening socket was created with protocol
``IPPROTO_TCP`` (``asyncio.base_events._set_nodelay``). uvicorn's single-process server gets such a socket from
``loop.create_server(host, port)``, but with ``--workers N`` it binds one with ``socket.socket(family)`` (protocol 0)
and hands it to its worker processes, so their connections kept Nagle's algorithm: a response written as headers then
body waited for the client's delayed ACK, about 40 ms on Linux, on every request (measured: a marginal over one
keep-alive connection took 44-48 ms with two workers against 2-5 ms with one; docs/api.md). :class:`NoDelayH11Protocol`
sets the option itself when a connection is made, whatever the listening socket, and is used for any worker count.
"""

from __future__ import annotations

import asyncio
import socket

from uvicorn.protocols.http.h11_impl import H11Protocol


def disable_nagle(transport: asyncio.BaseTransport) -> bool:
    """Set ``TCP_NODELAY`` on ``transport``'s socket when it is a TCP socket; whether it was set."""
    sock = transport.get_extra_info("socket")
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6) or sock.type != socket.SOCK_STREAM:
        return False
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return True


class NoDelayH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with :func:`disable_nagle` on each new connection."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        disable_nagle(transport)
        super().connection_made(transport)
