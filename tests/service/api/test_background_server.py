"""Waiting for a background server (service/api/server.py) costs the server nothing (issue 29, section 7: ``make
demo``).

``_wait_until_healthy`` made a new HTTP client for every look at ``/health``, about 50 ms of CPU each (an SSL context),
five looks a second: on two busy cores that slowed the very server start it waited for. One client serves every look.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from service.api import server


def test_the_wait_for_a_server_uses_one_client(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    made = []
    original = httpx.HTTPTransport.__init__

    def counted(self: httpx.HTTPTransport, *args: object, **kwargs: object) -> None:
        made.append(1)
        original(self, *args, **kwargs)

    monkeypatch.setattr(httpx.HTTPTransport, "__init__", counted)
    monkeypatch.setattr(server.time, "sleep", lambda seconds: None)  # look as often as it can: many looks, no wait
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        nobody = server.BackgroundServer(f"http://127.0.0.1:{server.free_port()}", alive, tmp_path / "log")
        with pytest.raises(RuntimeError, match=r"did not answer /health within 0.3 s"):
            server._wait_until_healthy(nobody, 0.3)
    finally:
        alive.kill()
        alive.wait()
    assert made == [1]  # main: one client (and SSL context) per look
