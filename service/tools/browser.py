"""Debian's chromium, headless, for the demo's console screenshot and the console's browser tests: where it is and
the flags it needs here (no sandbox as root; nothing that reaches for the network, which is closed)."""

from __future__ import annotations

import shutil

CHROMIUM_FLAGS = ("--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage")


def chromium_path() -> str | None:
    """The system's chromium (``apt-get install chromium``), or None; no browser is ever downloaded."""
    return shutil.which("chromium") or shutil.which("chromium-browser")
