"""Nagle's algorithm is off on the API's connections, also on a listening socket made the way uvicorn's worker
processes get theirs (protocol 0), where asyncio leaves it on."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys

from service.api import server
from service.api.tcp import NoDelayH11Protocol, disable_nagle

REPO = server.REPO


def _nodelay(sock: socket.socket | object) -> int:
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)  # type: ignore[attr-defined]


async def _server_side_options() -> tuple[int, int, bool]:
    """(TCP_NODELAY as asyncio left it, after :func:`disable_nagle`, its answer) on an accepted connection."""
    seen: asyncio.Future[tuple[int, int, bool]] = asyncio.get_running_loop().create_future()

    class Probe(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            sock = transport.get_extra_info("socket")
            before = _nodelay(sock)
            answer = disable_nagle(transport)
            seen.set_result((before, _nodelay(sock), answer))
            transport.close()

    listening = socket.socket(family=socket.AF_INET)  # as uvicorn binds for --workers N: protocol 0
    listening.bind(("127.0.0.1", 0))
    listening.listen()
    srv = await asyncio.get_running_loop().create_server(Probe, sock=listening)
    reader, writer = await asyncio.open_connection(*listening.getsockname())
    try:
        return await asyncio.wait_for(seen, 10)
    finally:
        writer.close()
        srv.close()
        await srv.wait_closed()


def test_nagle_is_turned_off_where_asyncio_left_it_on() -> None:
    before, after, answer = asyncio.run(_server_side_options())
    assert before == 0  # the premise: asyncio did not set it on this socket
    assert after != 0 and answer is True


def test_every_worker_count_serves_with_the_no_delay_protocol() -> None:
    for workers in (1, 2, 4):
        settings = server.uvicorn_config("sqlite:///x.db", "127.0.0.1", 8000, workers=workers)
        assert settings["http"] is NoDelayH11Protocol


def test_a_non_tcp_transport_is_left_alone() -> None:
    class Unix:
        def get_extra_info(self, name: str) -> object:
            return socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) if name == "socket" else None

    assert disable_nagle(Unix()) is False  # type: ignore[arg-type]


def test_the_protocol_module_imports_without_building_the_app() -> None:
    """uvicorn's workers unpickle their configuration, which names the protocol class, before they answer the
    supervisor's health checks: that import must stay light (no FastAPI app, no numpy)."""
    code = ("import sys, service.api.tcp; heavy = [m for m in ('fastapi', 'numpy', 'sqlalchemy', 'service.api.app') "
            "if m in sys.modules]; print(','.join(heavy))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert done.stdout.strip() == ""
