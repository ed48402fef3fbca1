"""A real browser for the console's tests: Debian's chromium (``.ci/run`` installs it; no test tool downloads one),
driven headless by Playwright, against a real server (uvicorn in a thread of the test, over a test world's database).

:func:`chromium_path` finds the browser or skips (fails in CI); :func:`serving` serves an app on a free port;
:func:`accessibility_violations` runs the vendored axe-core (``tests/support/vendor/axe-core``, its hash checked) on a
page and returns its serious and critical violations.
"""

from __future__ import annotations

import hashlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from service.tools.browser import CHROMIUM_FLAGS
from service.tools.browser import chromium_path as system_chromium

__all__ = ["CHROMIUM_FLAGS", "accessibility_violations", "chromium_path", "serving"]

AXE = Path(__file__).parent / "vendor" / "axe-core" / "axe.min.js"
AXE_SHA256 = "29348999450cdf2849a8e70b7912fc2da85a849da39c0d0d5394f51d4a9ed95c"


def chromium_path() -> str:
    """The system's chromium, or the test skipped (failed in CI, where .ci/run installs it)."""
    found = system_chromium()
    if found is None:
        message = "Debian's chromium is not installed (apt-get install chromium; .ci/run does it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def serving(app: object) -> Iterator[str]:
    """``app`` served by uvicorn on 127.0.0.1 in a thread until the block ends; its base URL."""
    import uvicorn

    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, name="console-test-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def accessibility_violations(page: object) -> list[str]:
    """axe-core's serious and critical violations of the page, one line each (rule, impact, first target)."""
    source = AXE.read_bytes()
    assert hashlib.sha256(source).hexdigest() == AXE_SHA256, "the vendored axe-core differs from its MANIFEST"
    page.add_script_tag(content=source.decode("utf-8"))  # type: ignore[attr-defined]
    found = page.evaluate("async () => (await axe.run(document)).violations")  # type: ignore[attr-defined]
    return [f"{v['id']} ({v['impact']}): {v['help']} at {v['nodes'][0]['target']}"
            for v in found if v["impact"] in ("serious", "critical")]
