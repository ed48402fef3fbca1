"""Real Marginalia servers for tests, and a test-only launcher with a crash hook.

``api_server(url, log)`` is ``marginalia serve`` on a free 127.0.0.1 port
(:func:`service.api.server.background_server`); with ``noise_marker`` it runs this module instead,
which installs the hook below and then serves exactly like ``marginalia serve``. Production code
has no such hook::

    python -m tests.support.apiserver --url URL --port P --noise-marker FILE

With the hook, every Laplace release draws its noise, writes FILE, then sleeps (at most
``HOOK_SLEEP_SECONDS``) before its payload would be stored: the crash test waits for FILE and
SIGKILLs the server (``BackgroundServer.kill``) right there.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from service.api.server import BackgroundServer, background_server, serve_command

HOOK_SLEEP_SECONDS = 300


@contextmanager
def api_server(database_url: str, log: Path, noise_marker: Path | None = None) -> Iterator[BackgroundServer]:
    """Serve ``database_url`` on 127.0.0.1 until the block ends (with the crash hook if ``noise_marker``)."""
    if noise_marker is None:
        command = serve_command
    else:
        def command(port: int) -> list[str]:
            return [sys.executable, "-m", "tests.support.apiserver", "--url", database_url, "--port", str(port),
                    "--noise-marker", str(noise_marker)]
    with background_server(database_url, log, command) as server:
        yield server


def _install_noise_hook(marker: Path) -> None:
    from service.mechanisms import direct

    original = direct.run_laplace

    def run_laplace_then_stall(*args: object, **kwargs: object) -> object:
        result = original(*args, **kwargs)  # every noisy value now exists
        marker.write_text("noise drawn\n")
        time.sleep(HOOK_SLEEP_SECONDS)  # the test SIGKILLs us here, before the payload is stored
        return result

    direct.run_laplace = run_laplace_then_stall


def main() -> None:
    parser = argparse.ArgumentParser(description="Test-only: serve with a stall after the noise of a release.")
    parser.add_argument("--url", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--noise-marker", type=Path, required=True)
    args = parser.parse_args()
    _install_noise_hook(args.noise_marker)
    from service.api.server import serve

    serve(args.url, "127.0.0.1", args.port, log_level="warning")


if __name__ == "__main__":
    main()
